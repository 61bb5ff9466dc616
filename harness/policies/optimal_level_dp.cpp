// LevelDp (optimal_level_dp.h).
#include "harness/policies/optimal_level_dp.h"

#include <algorithm>

namespace ckpt::optimal_detail {

// Rows do not increase with j, so a move is relaxed only from the first level at which it and its sub-problems are
// all feasible, and only up to the level at which taping every block fits: from there the row is the least FLOPs
// any move reaches (every forward once), filled, not relaxed. The same values as relaxing every level.
// The table is filled a block of levels at a time, every row in states() order within a block: a move at level j
// reads its sub-problems (rows before it in that order) at levels <= j, which this block or an earlier one has
// computed, and each cell sees the same moves in the same order as row by row, so the values are the same bits.
// Row by row, each of a long chain's rows read every shorter row whole, several MB beyond the caches (the DP ran
// at memory speed, 40% of `verify`); a block's slices of all the rows fit in L2.
LevelDp::LevelDp(const Family& f, int64_t unit, int64_t levels)
    : f_(f),
      unit_(unit),
      width_(levels + 1),
      table_(static_cast<size_t>(f.rows() * width_), kInf),
      first_(static_cast<size_t>(f.rows()), width_),
      allTaped_(static_cast<size_t>(f.rows()), 0),
      settled_(static_cast<size_t>(f.rows()), 0) {
  // Which levels each row relaxes depends on the sub-problems' first finite levels only, not on their values.
  f_.states([&](const Sub& u) {
    const size_t k = static_cast<size_t>(f_.key(u));
    settled_[k] = std::min(width_ - 1, allTapedLevel(u));
    f_.choices(u, [&](const Choice& c) { first_[k] = std::min(first_[k], start(c)); });
  });
  const int64_t block = std::min(width_, std::max<int64_t>(64, kBlockBytes / (8 * f.rows())));
  for (int64_t j0 = 0; j0 < width_; j0 += block) {
    const int64_t j1 = std::min(width_, j0 + block);
    f_.states([&](const Sub& u) {
      double* out = row(u);
      const size_t k = static_cast<size_t>(f_.key(u));
      const int64_t settled = settled_[k], end = std::min(settled + 1, j1);
      if (j0 < end) f_.choices(u, [&](const Choice& c) { relax(out, c, std::max(start(c), j0), end); });
      if (first_[k] <= settled && std::max(settled + 1, j0) < j1)
        std::fill(out + std::max(settled + 1, j0), out + j1, out[settled]);
    });
  }
}

// The least level at which the move can be finite: its own high-water and both sub-problems feasible.
int64_t LevelDp::start(const Choice& c) const {
  const int64_t from = std::max(ceilDiv(c.peak, unit_), c.a.valid() ? heldLevels(c, unit_) + first(c.a) : 0);
  return c.b.valid() ? std::max(from, first(c.b)) : from;
}

// The level from which taping every block of u (a turn at its last) fits the grid, as value() rounds it.
int64_t LevelDp::allTapedLevel(const Sub& u) {
  int64_t level = 0;
  f_.choices(u, [&](const Choice& c) {
    if (c.move == Move::kTurn) level = ceilDiv(c.peak, unit_);
    if (c.move == Move::kTape)
      level = std::max(ceilDiv(c.peak, unit_), heldLevels(c, unit_) + allTaped_[static_cast<size_t>(f_.key(c.a))]);
  });
  return allTaped_[static_cast<size_t>(f_.key(u))] = level;
}

// out[j] = min(out[j], the move's value at j) for from <= j < end.
void LevelDp::relax(double* __restrict out, const Choice& c, int64_t from, int64_t end) {
  const double flops = static_cast<double>(c.flops);
  if (c.a.valid()) {
    const int64_t shift = heldLevels(c, unit_);
    const double* __restrict a = row(c.a);
    if (c.b.valid()) {
      const double* __restrict b = row(c.b);
      for (int64_t j = from; j < end; ++j) out[j] = std::min(out[j], flops + a[j - shift] + b[j]);
    } else {
      for (int64_t j = from; j < end; ++j) out[j] = std::min(out[j], flops + a[j - shift]);
    }
  } else if (c.b.valid()) {
    const double* __restrict b = row(c.b);
    for (int64_t j = from; j < end; ++j) out[j] = std::min(out[j], flops + b[j]);
  } else {
    for (int64_t j = from; j < end; ++j) out[j] = std::min(out[j], flops);
  }
}

}  // namespace ckpt::optimal_detail
