// Bitwise comparison of two runs' step results: the loss, every parameter gradient, the input gradient, every
// state buffer and the generator state, step by step. Bit patterns are compared (a float is its uint32, a
// double its uint64), so -0.0 differs from 0.0 and NaN payloads count. Each differing tensor is reported once:
// first differing flat index, both values there, their ULP distance, and how many elements differ.
#pragma once
#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "reference/step.h"

namespace ckpt {

struct Difference {
  int step = 0;
  std::string tensor;       // "loss", "grad b0.fc.weight", "input_grad", "state b1.bn.running_mean", "rng.offset"
  std::string shape;        // non-empty when the shapes differ: "(8, 8) vs (0, 0)"; nothing else is then set
  int64_t firstIndex = -1;  // first differing flat (row-major) index
  std::string expected;     // the values at firstIndex, shortest text that round-trips in the tensor's type
  std::string actual;
  uint64_t expectedBits = 0;
  uint64_t actualBits = 0;
  // |a - b| after mapping each bit pattern to a signed-magnitude integer (so +0 and -0 are 0 apart although
  // their bits differ); for the generator state, the plain integer difference.
  uint64_t ulpDistance = 0;
  int64_t count = 0;            // differing elements in the tensor
  uint64_t maxUlpDistance = 0;  // the largest ulpDistance over all differing elements (rounding-level or not)
};

struct Comparison {
  bool bitwiseEqual = true;
  std::vector<Difference> differences;
};

template <class T>
Comparison compareSteps(const std::vector<StepResult<T>>& expected, const std::vector<StepResult<T>>& actual);

extern template Comparison compareSteps(const std::vector<StepResult<float>>&, const std::vector<StepResult<float>>&);
extern template Comparison compareSteps(const std::vector<StepResult<double>>&, const std::vector<StepResult<double>>&);

// One named tensor of two runs, flat and of equal length, bit by bit: nullopt when equal. For user models
// (harness/user_model/user_model.h), whose tensors are not StepResults. Integers: the distance is |a - b|.
std::optional<Difference> compareFlat(int step, const std::string& name, const float* a, const float* b, int64_t n);
std::optional<Difference> compareFlat(int step, const std::string& name, const double* a, const double* b, int64_t n);
std::optional<Difference> compareFlat(int step, const std::string& name, const int64_t* a, const int64_t* b, int64_t n);

// A run whose loss, gradients or state are not finite cannot be judged: NaN equals NaN bit for bit, so every
// comparison of two diverged runs would "hold". nonFinite names the first such value of one tensor in one line
// ("step 0 grad fc.weight: 12 of 64 elements are not finite, the first NaN at index 3"), nullopt when all are
// finite; firstNonFinite does so for a whole run, step by step in compareSteps' order (loss, gradients, input
// gradient, state). The one home of the rule: validate (built-in adapters and user models) and run call it on the
// run they compare against.
std::optional<std::string> nonFinite(int step, const std::string& name, const float* a, int64_t n);
std::optional<std::string> nonFinite(int step, const std::string& name, const double* a, int64_t n);
template <class T>
std::optional<std::string> firstNonFinite(const std::vector<StepResult<T>>& run);
extern template std::optional<std::string> firstNonFinite(const std::vector<StepResult<float>>&);
extern template std::optional<std::string> firstNonFinite(const std::vector<StepResult<double>>&);
// The sentence every command ends a non-finite run's message with.
inline constexpr const char* kNotJudged = "a run with non-finite values cannot be judged (NaN equals NaN bit for bit)";

nlohmann::json toJson(const Difference& d);
nlohmann::json toJson(const Comparison& c);
// One line per difference, for people.
std::string toText(const Difference& d);

}  // namespace ckpt
