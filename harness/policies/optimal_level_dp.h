// C(sub-problem, j) as a dense table of every row at every level (optimal_table.h): O(moves x levels), each move
// a vectorised pass over the levels. The tabulation for a coarse grid (a few hundred levels, as a long
// heterogeneous chain gets), where a row's value changes at most levels and little is gained by skipping any.
#pragma once
#include <cstdint>
#include <vector>

#include "harness/policies/optimal_table.h"

namespace ckpt::optimal_detail {

class LevelDp {
 public:
  LevelDp(const Family& f, int64_t unit, int64_t levels);
  double at(const Sub& u, int64_t j) const { return row(u)[j]; }
  double value(const Choice& c, int64_t j) const { return moveValue(*this, c, unit_, j); }

 private:
  double* row(const Sub& u) { return table_.data() + f_.key(u) * width_; }
  const double* row(const Sub& u) const { return table_.data() + f_.key(u) * width_; }
  int64_t first(const Sub& u) const { return first_[static_cast<size_t>(f_.key(u))]; }
  int64_t start(const Choice& c) const;
  int64_t allTapedLevel(const Sub& u);
  void relax(double* __restrict out, const Choice& c, int64_t from, int64_t end);

  const Family& f_;
  int64_t unit_;
  int64_t width_;
  std::vector<double> table_;
  std::vector<int64_t> first_;     // per row: its first level that may be finite (width_: none)
  std::vector<int64_t> allTaped_;  // per row: allTapedLevel
  std::vector<int64_t> settled_;   // per row: the last level it relaxes, min(levels, allTapedLevel)
  static constexpr int64_t kBlockBytes = int64_t{1} << 20;  // one block's slices of every row
};

}  // namespace ckpt::optimal_detail
