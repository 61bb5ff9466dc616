#include "harness/compare.h"

#include <charconv>
#include <algorithm>
#include <cmath>
#include <cstring>
#include <type_traits>

namespace ckpt {
namespace {

template <class T>
using Bits = std::conditional_t<sizeof(T) == 4, uint32_t, uint64_t>;

template <class T>
Bits<T> bitsOf(T v) {
  Bits<T> b;
  std::memcpy(&b, &v, sizeof b);
  return b;
}

// Distance between two values on the signed-magnitude integer line of their bit patterns.
template <class T>
uint64_t ulpDistance(Bits<T> a, Bits<T> b) {
  constexpr Bits<T> sign = Bits<T>(1) << (8 * sizeof(T) - 1);
  const uint64_t ma = a & ~sign, mb = b & ~sign;
  if ((a & sign) != (b & sign)) return ma + mb;  // each < 2^63, so the sum fits
  return ma > mb ? ma - mb : mb - ma;
}

template <class T>
std::string text(T v) {
  char buf[64];
  const auto r = std::to_chars(buf, buf + sizeof buf, v);
  return std::string(buf, r.ptr);
}

class Comparer {
 public:
  explicit Comparer(Comparison& out) : out_(out) {}

  template <class T>
  void values(int step, const std::string& name, const T* a, int64_t ra, int64_t ca, const T* b, int64_t rb,
              int64_t cb) {
    if (ra != rb || ca != cb) {
      Difference d;
      d.step = step;
      d.tensor = name;
      d.shape = "(" + std::to_string(ra) + ", " + std::to_string(ca) + ") vs (" + std::to_string(rb) + ", " +
                std::to_string(cb) + ")";
      d.count = std::max(ra * ca, rb * cb);
      add(std::move(d));
      return;
    }
    Difference d;
    for (int64_t i = 0; i < ra * ca; ++i) {
      const Bits<T> x = bitsOf(a[i]), y = bitsOf(b[i]);
      if (x == y) continue;
      if (d.count++ == 0) {
        d.firstIndex = i;
        d.expected = text(a[i]);
        d.actual = text(b[i]);
        d.expectedBits = x;
        d.actualBits = y;
        d.ulpDistance = ulpDistance<T>(x, y);
      }
      d.maxUlpDistance = std::max(d.maxUlpDistance, ulpDistance<T>(x, y));
    }
    if (d.count == 0) return;
    d.step = step;
    d.tensor = name;
    add(std::move(d));
  }

  template <class T>
  void matrix(int step, const std::string& name, const Mat<T>& a, const Mat<T>& b) {
    values(step, name, a.data(), a.rows(), a.cols(), b.data(), b.rows(), b.cols());
  }

  template <class T>
  void named(int step, const std::string& prefix, const std::vector<NamedMat<T>>& a,
             const std::vector<NamedMat<T>>& b) {
    const size_t n = std::max(a.size(), b.size());
    for (size_t k = 0; k < n; ++k) {
      if (k >= a.size() || k >= b.size() || a[k].name != b[k].name) {
        Difference d;
        d.step = step;
        d.tensor = prefix + " " + (k < a.size() ? a[k].name : "<none>") + " / " + (k < b.size() ? b[k].name : "<none>");
        d.shape = "tensor lists differ at position " + std::to_string(k);
        add(std::move(d));
        return;
      }
      matrix(step, prefix + " " + a[k].name, a[k].value, b[k].value);
    }
  }

  void integer(int step, const std::string& name, uint64_t a, uint64_t b) {
    if (a == b) return;
    Difference d;
    d.step = step;
    d.tensor = name;
    d.firstIndex = 0;
    d.expected = std::to_string(a);
    d.actual = std::to_string(b);
    d.expectedBits = a;
    d.actualBits = b;
    d.ulpDistance = a > b ? a - b : b - a;
    d.maxUlpDistance = d.ulpDistance;
    d.count = 1;
    add(std::move(d));
  }

 private:
  void add(Difference d) {
    out_.bitwiseEqual = false;
    out_.differences.push_back(std::move(d));
  }
  Comparison& out_;
};

}  // namespace

template <class T>
Comparison compareSteps(const std::vector<StepResult<T>>& expected, const std::vector<StepResult<T>>& actual) {
  Comparison c;
  Comparer cmp(c);
  if (expected.size() != actual.size()) cmp.integer(-1, "steps", expected.size(), actual.size());
  const size_t n = std::min(expected.size(), actual.size());
  for (size_t s = 0; s < n; ++s) {
    const auto& a = expected[s];
    const auto& b = actual[s];
    const int step = static_cast<int>(s);
    cmp.values(step, "loss", &a.loss, 1, 1, &b.loss, 1, 1);
    cmp.named(step, "grad", a.grads, b.grads);
    cmp.matrix(step, "input_grad", a.inputGrad, b.inputGrad);
    cmp.named(step, "state", a.state, b.state);
    cmp.integer(step, "rng.seed", a.rng.seed, b.rng.seed);
    cmp.integer(step, "rng.offset", a.rng.offset, b.rng.offset);
  }
  return c;
}

template Comparison compareSteps(const std::vector<StepResult<float>>&, const std::vector<StepResult<float>>&);
template Comparison compareSteps(const std::vector<StepResult<double>>&, const std::vector<StepResult<double>>&);

namespace {

template <class T>
std::optional<std::string> nonFiniteOf(int step, const std::string& name, const T* a, int64_t n) {
  int64_t count = 0, first = -1;
  for (int64_t i = 0; i < n; ++i)
    if (!std::isfinite(a[i]) && count++ == 0) first = i;
  if (count == 0) return std::nullopt;
  const T v = a[first];
  const std::string what = std::isnan(v) ? "NaN" : v > 0 ? "+inf" : "-inf";
  const std::string where = "step " + std::to_string(step) + " " + name + ": ";
  if (n == 1) return where + what;
  return where + std::to_string(count) + " of " + std::to_string(n) + " elements are not finite, the first " + what +
         " at index " + std::to_string(first);
}

template <class T>
std::optional<std::string> nonFiniteNamed(int step, const std::string& prefix, const std::vector<NamedMat<T>>& ts) {
  for (const auto& t : ts)
    if (auto why = nonFiniteOf(step, prefix + " " + t.name, t.value.data(), t.value.size())) return why;
  return std::nullopt;
}

}  // namespace

std::optional<std::string> nonFinite(int step, const std::string& name, const float* a, int64_t n) {
  return nonFiniteOf(step, name, a, n);
}

std::optional<std::string> nonFinite(int step, const std::string& name, const double* a, int64_t n) {
  return nonFiniteOf(step, name, a, n);
}

template <class T>
std::optional<std::string> firstNonFinite(const std::vector<StepResult<T>>& run) {
  for (size_t s = 0; s < run.size(); ++s) {
    const auto& r = run[s];
    const int step = static_cast<int>(s);
    if (auto why = nonFiniteOf(step, "loss", &r.loss, 1)) return why;
    if (auto why = nonFiniteNamed(step, "grad", r.grads)) return why;
    if (auto why = nonFiniteOf(step, "input_grad", r.inputGrad.data(), r.inputGrad.size())) return why;
    if (auto why = nonFiniteNamed(step, "state", r.state)) return why;
  }
  return std::nullopt;
}

template std::optional<std::string> firstNonFinite(const std::vector<StepResult<float>>&);
template std::optional<std::string> firstNonFinite(const std::vector<StepResult<double>>&);

std::optional<Difference> compareFlat(int step, const std::string& name, const float* a, const float* b, int64_t n) {
  Comparison c;
  Comparer(c).values(step, name, a, n, 1, b, n, 1);
  return c.differences.empty() ? std::nullopt : std::optional<Difference>(c.differences.front());
}

std::optional<Difference> compareFlat(int step, const std::string& name, const double* a, const double* b, int64_t n) {
  Comparison c;
  Comparer(c).values(step, name, a, n, 1, b, n, 1);
  return c.differences.empty() ? std::nullopt : std::optional<Difference>(c.differences.front());
}

std::optional<Difference> compareFlat(int step, const std::string& name, const int64_t* a, const int64_t* b,
                                      int64_t n) {
  Difference d;
  for (int64_t i = 0; i < n; ++i) {
    if (a[i] == b[i]) continue;
    // Two's-complement difference as unsigned: exact for every pair, no signed overflow.
    const uint64_t ua = static_cast<uint64_t>(a[i]), ub = static_cast<uint64_t>(b[i]);
    const uint64_t dist = a[i] > b[i] ? ua - ub : ub - ua;
    if (d.count++ == 0) {
      d.firstIndex = i;
      d.expected = std::to_string(a[i]);
      d.actual = std::to_string(b[i]);
      d.expectedBits = ua;
      d.actualBits = ub;
      d.ulpDistance = dist;
    }
    d.maxUlpDistance = std::max(d.maxUlpDistance, dist);
  }
  if (d.count == 0) return std::nullopt;
  d.step = step;
  d.tensor = name;
  return d;
}

namespace {
std::string hex(uint64_t v) {
  char buf[24];
  const auto r = std::to_chars(buf, buf + sizeof buf, v, 16);
  return "0x" + std::string(buf, r.ptr);
}
}  // namespace

nlohmann::json toJson(const Difference& d) {
  nlohmann::json j;
  j["step"] = d.step;
  j["tensor"] = d.tensor;
  if (!d.shape.empty()) {
    j["shape"] = d.shape;
    j["count"] = d.count;
    return j;
  }
  j["first_index"] = d.firstIndex;
  j["expected"] = d.expected;
  j["actual"] = d.actual;
  j["expected_bits"] = hex(d.expectedBits);
  j["actual_bits"] = hex(d.actualBits);
  j["ulp_distance"] = d.ulpDistance;
  j["max_ulp_distance"] = d.maxUlpDistance;
  j["count"] = d.count;
  return j;
}

nlohmann::json toJson(const Comparison& c) {
  nlohmann::json j;
  j["bitwise_equal"] = c.bitwiseEqual;
  j["differences"] = nlohmann::json::array();
  for (const auto& d : c.differences) j["differences"].push_back(toJson(d));
  return j;
}

std::string toText(const Difference& d) {
  std::string s = "step " + std::to_string(d.step) + " " + d.tensor + ": ";
  if (!d.shape.empty()) return s + d.shape;
  return s + std::to_string(d.count) + " element(s) differ; first at [" + std::to_string(d.firstIndex) +
         "]: " + d.expected + " (" + hex(d.expectedBits) + ") vs " + d.actual + " (" + hex(d.actualBits) + "), " +
         std::to_string(d.ulpDistance) + " ulp";
}

}  // namespace ckpt
