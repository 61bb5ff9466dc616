// C(sub-problem, j) for a chain whose blocks all have the same model (optimal_table.h): a sub-problem is its length
// and whether the loss is still to come, so a level of the table is 2L values. The table is filled a level at a
// time (a level reads itself and the level what a move holds below it, both in L1 cache), and a row's split moves
// at a level are one vectorised reduction over the split point. The tabulation for property 5's long chains
// (100-1000 blocks, 500 levels), where LevelDp read a shorter row from another page for every move and level.
#pragma once
#include <cstdint>
#include <vector>

#include "harness/policies/optimal_table.h"

namespace ckpt::optimal_detail {

class HomogeneousDp {
 public:
  // m: homogeneous (one block model).
  HomogeneousDp(const Family& f, const ChainModel& m, int64_t unit, int64_t levels);
  double at(const Sub& u, int64_t j) const { return level(j)[f_.key(u)]; }
  double value(const Choice& c, int64_t j) const { return moveValue(*this, c, unit_, j); }

 private:
  double* level(int64_t j) { return table_.data() + j * rows_; }
  const double* level(int64_t j) const { return table_.data() + j * rows_; }

  const Family& f_;
  int64_t unit_, rows_;
  std::vector<double> table_;  // level-major: level j holds every row, in Family::key order
};

}  // namespace ckpt::optimal_detail
