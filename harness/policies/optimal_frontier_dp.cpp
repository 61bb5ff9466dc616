// FrontierDp (optimal_frontier_dp.h).
#include "harness/policies/optimal_frontier_dp.h"

#include <algorithm>
#include <utility>

namespace ckpt::optimal_detail {

FrontierDp::FrontierDp(const Family& f, int64_t unit, int64_t levels)
    : f_(f),
      unit_(unit),
      top_(levels),
      spans_(static_cast<size_t>(f.rows())),
      best_(static_cast<size_t>(levels + 1), kInf) {
  f_.states([&](const Sub& u) {
    lo_ = top_ + 1;
    hi_ = -1;
    f_.choices(u, [&](const Choice& c) { envelop(c); });
    // The lower envelope: the levels at which the least value offered so far drops.
    Span& span = spans_[static_cast<size_t>(f_.key(u))];
    span.begin = points_.size();
    double least = kInf;
    for (int64_t j = lo_; j <= hi_; ++j) {
      const double v = best_[static_cast<size_t>(j)];
      best_[static_cast<size_t>(j)] = kInf;
      if (v < least) {
        least = v;
        points_.push_back({j, v});
      }
    }
    span.end = points_.size();
  });
}

double FrontierDp::at(const Sub& u, int64_t j) const {
  const Span& span = spans_[static_cast<size_t>(f_.key(u))];
  const Point* b = points_.data() + span.begin;
  const Point* e = points_.data() + span.end;
  const Point* p = std::upper_bound(b, e, j, [](int64_t level, const Point& q) { return level < q.level; });
  return p == b ? kInf : (p - 1)->flops;
}

void FrontierDp::offer(int64_t j, double v) {
  double& slot = best_[static_cast<size_t>(j)];
  slot = std::min(slot, v);
  lo_ = std::min(lo_, j);
  hi_ = std::max(hi_, j);
}

// The move's value at every level where it drops, into best_. A missing sub-problem stands as a frontier of one
// point (level 0, no FLOPs), so every move is a merge of two; the sum is formed as moveValue forms it.
void FrontierDp::envelop(const Choice& c) {
  static constexpr Point kNothing[1] = {{0, 0.0}};
  const double flops = static_cast<double>(c.flops);
  const int64_t shift = c.a.valid() ? heldLevels(c, unit_) : 0;
  const auto frontier = [&](const Sub& s) -> std::pair<const Point*, const Point*> {
    if (!s.valid()) return {kNothing, kNothing + 1};
    const Span& span = spans_[static_cast<size_t>(f_.key(s))];
    return {points_.data() + span.begin, points_.data() + span.end};
  };
  auto [a, aEnd] = frontier(c.a);
  auto [b, bEnd] = frontier(c.b);
  if (a == aEnd || b == bEnd) return;  // a sub-problem with no schedule on the grid
  int64_t j = std::max({ceilDiv(c.peak, unit_), a->level + shift, b->level});
  if (j > top_) return;
  // The points in force at j, then every drop of either up to the last level.
  while (a + 1 != aEnd && (a + 1)->level + shift <= j) ++a;
  while (b + 1 != bEnd && (b + 1)->level <= j) ++b;
  for (;;) {
    offer(j, c.a.valid() ? (c.b.valid() ? flops + a->flops + b->flops : flops + a->flops)
                         : (c.b.valid() ? flops + b->flops : flops));
    const int64_t nextA = a + 1 != aEnd ? (a + 1)->level + shift : top_ + 1;
    const int64_t nextB = b + 1 != bEnd ? (b + 1)->level : top_ + 1;
    j = std::min(nextA, nextB);
    if (j > top_) return;
    if (nextA == j) ++a;
    if (nextB == j) ++b;
  }
}

}  // namespace ckpt::optimal_detail
