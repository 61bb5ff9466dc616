// Float64 central finite differences against analytic gradients. Tolerances live here, in one place.
#pragma once
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <string>

namespace ckpt::test {

// h balances truncation (~h^2) against rounding (~eps |f| / h) for O(1) objectives in double.
inline constexpr double kFdStep = 1e-6;
inline constexpr double kFdTolerance = 1e-6;
// Denominator floor: a gradient entry below it is compared absolutely against kFdTolerance * kFdFloor, since
// the finite difference itself carries an absolute error of about eps |f| / h ~ 1e-10.
inline constexpr double kFdFloor = 1e-2;

inline double fdRelError(double analytic, double numeric) {
  return std::abs(analytic - numeric) / std::max({std::abs(analytic), std::abs(numeric), kFdFloor});
}

struct FdResult {
  double maxRel = 0;
  int64_t worst = -1;  // element index of the largest error
  double analytic = 0;
  double numeric = 0;
  void merge(const FdResult& o) {
    if (o.maxRel > maxRel || worst < 0) *this = o;
  }
};

// Perturbs values[i] by +-h for every i, evaluating objective() (which must read values in place), and compares
// the central difference with analytic[i]. values is restored bit for bit.
template <class F>
FdResult fdCompare(double* values, int64_t n, const double* analytic, F&& objective, double h = kFdStep) {
  FdResult r;
  for (int64_t i = 0; i < n; ++i) {
    const double saved = values[i];
    values[i] = saved + h;
    const double fp = objective();
    values[i] = saved - h;
    const double fm = objective();
    values[i] = saved;
    const double numeric = (fp - fm) / (2 * h);
    const double e = fdRelError(analytic[i], numeric);
    if (r.worst < 0 || e > r.maxRel) r = {e, i, analytic[i], numeric};
  }
  return r;
}

}  // namespace ckpt::test
