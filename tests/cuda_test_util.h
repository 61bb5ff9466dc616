// Shared helpers of the device-backend tests: random matrices, bitwise and tolerance comparisons that name the
// tensor, the first bad index, both values and how many elements are off.
#pragma once
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <sstream>
#include <string>

#include "reference/chain.h"
#include "tests/cuda_tolerance.h"

namespace ckpt::gpu::test {

// Uniform in [-scale, scale], from a Philox stream of its own.
template <class T>
Mat<T> randomMat(int64_t rows, int64_t cols, uint64_t stream, double scale = 1.0) {
  Mat<T> m(rows, cols);
  fillUniform(m, 12345, stream, scale);
  return m;
}

template <class T>
bool sameBits(T a, T b) {
  return std::memcmp(&a, &b, sizeof(T)) == 0;
}

template <class T>
::testing::AssertionResult bitwiseEqual(const std::string& what, const T* got, const T* want, int64_t n) {
  int64_t bad = 0, first = -1;
  for (int64_t i = 0; i < n; ++i)
    if (!sameBits(got[i], want[i]) && bad++ == 0) first = i;
  if (bad == 0) return ::testing::AssertionSuccess();
  std::ostringstream os;
  os.precision(std::is_same_v<T, float> ? 9 : 17);
  os << what << ": " << bad << " of " << n << " elements differ bitwise; first at " << first << ": got " << got[first]
     << ", want " << want[first];
  return ::testing::AssertionFailure() << os.str();
}

// `floor` is a scale below which the tensor's own scale does not go: a gradient that is zero analytically (a
// bias feeding BatchNorm) holds only rounding noise, to be judged against the step's other gradients.
template <class T>
::testing::AssertionResult near(const std::string& what, const T* got, const T* want, int64_t n, double rtol,
                                double floor = 0) {
  double scale = floor;
  for (int64_t i = 0; i < n; ++i) scale = std::max(scale, std::abs(static_cast<double>(want[i])));
  int64_t bad = 0, first = -1;
  double worst = 0;
  for (int64_t i = 0; i < n; ++i) {
    const double g = static_cast<double>(got[i]), w = static_cast<double>(want[i]);
    const double err = std::abs(g - w), allowed = rtol * (std::abs(w) + scale);
    if (!(err <= allowed)) {
      if (bad++ == 0) first = i;
    }
    if (scale > 0) worst = std::max(worst, err / scale);
  }
  if (bad == 0) return ::testing::AssertionSuccess();
  std::ostringstream os;
  os.precision(std::is_same_v<T, float> ? 9 : 17);
  os << what << ": " << bad << " of " << n << " elements outside rtol " << rtol << "; first at " << first << ": got "
     << got[first] << ", want " << want[first] << " (worst error / scale " << worst << ")";
  return ::testing::AssertionFailure() << os.str();
}

// The largest |value| over every parameter gradient of a step.
template <class Grads>
double gradScale(const Grads& grads) {
  double s = 0;
  for (const auto& g : grads)
    for (int64_t i = 0; i < g.value.size(); ++i) s = std::max(s, std::abs(static_cast<double>(g.value.data()[i])));
  return s;
}

template <class T>
::testing::AssertionResult sameShape(const std::string& what, int64_t r1, int64_t c1, int64_t r2, int64_t c2) {
  if (r1 == r2 && c1 == c2) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << what << ": shape (" << r1 << ", " << c1 << ") vs (" << r2 << ", " << c2
                                       << ")";
}

}  // namespace ckpt::gpu::test
