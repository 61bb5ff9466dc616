// What the optimal DP's tabulations share (optimal.cpp says which one a chain gets): C(sub-problem, j), the least
// forward FLOPs of a sub-problem with peak <= j grid units (kInf: none), and a move's value on the grid. Each of
// LevelDp (optimal_level_dp.h), FrontierDp (optimal_frontier_dp.h) and HomogeneousDp (optimal_homogeneous_dp.h)
// fills the same values, bit for bit (tests/optimal_tables_test.cpp), by another route. Internal to the optimal
// policy.
#pragma once
#include <cstdint>
#include <limits>

#include "harness/policies/optimal_family.h"

namespace ckpt::optimal_detail {

constexpr double kInf = std::numeric_limits<double>::infinity();

inline int64_t ceilDiv(int64_t a, int64_t b) { return (a + b - 1) / b; }

// The grid's rounding: what a move holds across its first sub-problem, in whole units.
inline int64_t heldLevels(const Choice& c, int64_t unit) { return ceilDiv(c.held, unit); }

// A move's value at level j, from a table's at(sub-problem, level): its own high-water rounded up to whole units,
// its first sub-problem with what the move holds meanwhile taken off the level. FLOPs are summed in doubles (exact
// below 2^53) in this order by every tabulation, so the reconstruction finds the table's values.
template <class Table>
double moveValue(const Table& t, const Choice& c, int64_t unit, int64_t j) {
  if (ceilDiv(c.peak, unit) > j) return kInf;
  double v = static_cast<double>(c.flops);
  if (c.a.valid()) {
    const int64_t ja = j - heldLevels(c, unit);
    v = ja < 0 ? kInf : v + t.at(c.a, ja);
  }
  if (c.b.valid()) v = v + t.at(c.b, j);
  return v;
}

}  // namespace ckpt::optimal_detail
