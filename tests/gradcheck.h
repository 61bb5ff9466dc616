// Float64 central finite differences against analytic gradients. Tolerances live here, in one place.
#pragma once
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <string>

namespace ckpt::test {

// The five-point stencil's truncation error is ~h^4 f^(5), not the central difference's ~h^2 f''': chains of
// LayerNorm over two features and attention have third derivatives near 1e5, where a central difference at
// h = 1e-6 is already 2.5e-6 off (an error that falls as h^2, i.e. truncation, not a wrong gradient). h keeps
// the rounding error (~1.5 eps |f| / h) near 1e-9 for O(1) objectives in double.
inline constexpr double kFdStep = 1e-6;
inline constexpr double kFdTolerance = 1e-6;
// Denominator floor: a gradient entry below it is compared absolutely against kFdTolerance * kFdFloor, since
// the finite difference itself carries an absolute error of about eps |f| / h ~ 1e-10.
inline constexpr double kFdFloor = 1e-2;

// On a deep chain the objective's own rounding noise is not eps |f| but grows with its intermediates, which the
// largest gradient measures: a whole-chain check passes floor = kFdChainFloor * max |gradient| (a parameter with a
// true gradient of 1e-12 next to one of 40 showed a 1.5e-8 difference that scaled as 1/h, i.e. rounding).
inline constexpr double kFdChainFloor = 1e-2;

inline double fdRelError(double analytic, double numeric, double floor = kFdFloor) {
  return std::abs(analytic - numeric) / std::max({std::abs(analytic), std::abs(numeric), floor});
}

// The oracle can be wrong: near a kink (a ReLU at zero, a max that switches) or at an ill-conditioned point
// (LayerNorm over two nearly equal features) a finite difference measures the function's jump, not its slope.
// It detects that instead of being loosened: every element is differenced at two step sizes, h and 2h, and
// where the two five-point estimates disagree beyond kFdTolerance the element is *unreliable*: counted, not
// compared. A caller with unreliable elements moves off the point (tests/reference_chain_test.cpp jitters it)
// and checks again. A wrong analytic gradient is still caught: there both estimates agree with each other and
// not with it.
struct FdResult {
  double maxRel = 0;   // over the reliable elements
  int64_t worst = -1;  // element index of the largest error
  double analytic = 0;
  double numeric = 0;
  int64_t checked = 0;     // elements compared
  int64_t unreliable = 0;  // elements whose two finite differences disagree: not compared
  void merge(const FdResult& o) {
    const int64_t c = checked + o.checked, u = unreliable + o.unreliable;
    if (o.maxRel > maxRel || worst < 0) {
      maxRel = o.maxRel;
      worst = o.worst;
      analytic = o.analytic;
      numeric = o.numeric;
    }
    checked = c;
    unreliable = u;
  }
};

// Perturbs values[i] by +-h, +-2h and +-4h for every i, evaluating objective() (which must read values in
// place), and compares the five-point derivative at step h with analytic[i] where it agrees with the one at step
// 2h. values is restored bit for bit.
template <class F>
FdResult fdCompare(double* values, int64_t n, const double* analytic, F&& objective, double h = kFdStep,
                   double floor = kFdFloor) {
  FdResult r;
  for (int64_t i = 0; i < n; ++i) {
    const double saved = values[i];
    auto at = [&](double dx) {
      values[i] = saved + dx;
      return objective();
    };
    const double d1 = at(h) - at(-h), d2 = at(2 * h) - at(-2 * h), d4 = at(4 * h) - at(-4 * h);
    values[i] = saved;
    const double numeric = (8 * d1 - d2) / (12 * h);
    const double coarse = (8 * d2 - d4) / (24 * h);
    if (fdRelError(coarse, numeric, floor) > kFdTolerance) {
      ++r.unreliable;
      continue;
    }
    ++r.checked;
    const double e = fdRelError(analytic[i], numeric, floor);
    if (r.worst < 0 || e > r.maxRel) {
      r.maxRel = e;
      r.worst = i;
      r.analytic = analytic[i];
      r.numeric = numeric;
    }
  }
  return r;
}

// A whole-chain tensor against the oracle: the floor scales with its largest gradient (kFdChainFloor).
template <class F>
FdResult fdCompareChainTensor(double* values, int64_t n, const double* analytic, F&& objective) {
  double largest = 0;
  for (int64_t i = 0; i < n; ++i) largest = std::max(largest, std::abs(analytic[i]));
  return fdCompare(values, n, analytic, objective, kFdStep, std::max(kFdFloor, kFdChainFloor * largest));
}

}  // namespace ckpt::test
