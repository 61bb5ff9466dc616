// C(sub-problem, j) kept as each row's frontier: the levels at which the row drops and its value from there
// (optimal_table.h). Rows do not increase with j and a move's value changes only where one of its sub-problems'
// rows drops, so a move is the merge of two frontiers (the first shifted by what the move holds across it) and a
// row is the lower envelope of its moves'. The work per move is the size of its sub-problems' frontiers, not the
// number of levels: the tabulation for fine grids. A random verify case of 20-40 blocks gets an exact grid of
// hundreds to thousands of levels (its byte counts' gcd is a few bytes) while its rows hold 10-200 points.
#pragma once
#include <cstdint>
#include <vector>

#include "harness/policies/optimal_table.h"

namespace ckpt::optimal_detail {

class FrontierDp {
 public:
  FrontierDp(const Family& f, int64_t unit, int64_t levels);
  double at(const Sub& u, int64_t j) const;
  double value(const Choice& c, int64_t j) const { return moveValue(*this, c, unit_, j); }

 private:
  struct Point {
    int64_t level;
    double flops;
  };
  struct Span {
    size_t begin = 0, end = 0;
  };

  void envelop(const Choice& c);
  void offer(int64_t j, double v);

  const Family& f_;
  int64_t unit_;
  int64_t top_;                // the last level
  std::vector<Span> spans_;    // per row key: its points
  std::vector<Point> points_;  // every row's frontier, rows in states() order
  std::vector<double> best_;   // the row being built: least value offered at each level (kInf between rows)
  int64_t lo_ = 0, hi_ = -1;   // the levels offered to the row being built
};

}  // namespace ckpt::optimal_detail
