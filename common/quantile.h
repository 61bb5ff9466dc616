// The q-th quantile (q in [0, 1]) of a sample, linear between ranks (numpy's default): the median at 0.5, the
// quartiles at 0.25 and 0.75. 0 for an empty sample. Shared by bench_engine's repetition statistics and
// `validate --plan`'s timed pairs, so both report spread the same way.
#pragma once
#include <algorithm>
#include <cmath>
#include <vector>

namespace ckpt {

inline double quantile(std::vector<double> v, double q) {
  if (v.empty()) return 0.0;
  std::sort(v.begin(), v.end());
  const double pos = q * static_cast<double>(v.size() - 1);
  const size_t lo = static_cast<size_t>(std::floor(pos));
  const size_t hi = std::min(lo + 1, v.size() - 1);
  return v[lo] + (pos - static_cast<double>(lo)) * (v[hi] - v[lo]);
}

}  // namespace ckpt
