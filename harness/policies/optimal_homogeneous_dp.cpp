// HomogeneousDp (optimal_homogeneous_dp.h). The moves are Family::choices' for a homogeneous chain, written out
// per row kind: after the loss (g_{t+1} held), key length-1; before it (the loss inside), key L + length-1.
#include "harness/policies/optimal_homogeneous_dp.h"

#include <Eigen/Core>
#include <algorithm>
#include <cmath>
#include <stdexcept>

namespace ckpt::optimal_detail {

HomogeneousDp::HomogeneousDp(const Family& f, const ChainModel& m, int64_t unit, int64_t levels)
    : f_(f), unit_(unit), rows_(f.rows()), table_(static_cast<size_t>(rows_ * (levels + 1)), kInf) {
  if (!m.homogeneous()) throw std::logic_error("HomogeneousDp: the chain's blocks differ");
  const int n = m.layers;
  const BlockModel& b = m[0];
  const double flops = static_cast<double>(b.flops);
  Eigen::ArrayXd advance(std::max(n - 1, 1));  // split k: blocks s..s+k-1 advanced, k forwards
  for (int k = 1; k < n; ++k) advance[k - 1] = static_cast<double>(k) * flops;
  const int64_t held = ceilDiv(b.in, unit_), tapeHeld = ceilDiv(b.tapeBytes, unit_);
  for (int64_t j = 0; j <= levels; ++j) {
    double* row = level(j);
    const double* atHeld = j >= held ? level(j - held) : nullptr;          // a split's first sub-problem
    const double* atTape = j >= tapeHeld ? level(j - tapeHeld) : nullptr;  // a tape move's
    for (int len = 1; len <= n; ++len) {
      for (const bool pre : {false, true}) {  // the after-loss row first: loss-first reads it
        const int64_t g = pre ? 0 : b.out;    // g_{t+1}, held throughout
        const int64_t base = pre ? n : 0;     // this kind's length-1 key
        // Every move forwards every block at least once, and rows do not increase with j: a row at that floor
        // stays there.
        const double floor = static_cast<double>(len) * flops;
        if (j > 0 && level(j - 1)[base + len - 1] == floor) {
          row[base + len - 1] = floor;
          continue;
        }
        double best = kInf;
        if (len == 1) {
          if (ceilDiv(pre ? m.lastTurnPeak : b.turnPeak, unit_) <= j) best = flops;
        } else {
          if (atTape && ceilDiv(std::max(g + b.tapePeak, b.backPeak), unit_) <= j)
            best = std::min(best, flops + atTape[base + len - 2]);
          if (atHeld) {
            // Split k = 1..len-1: the same kind's row of length len-k at j - held, then the after-loss row of
            // length k at j; its own high-water has no interior block for k = 1 and one for every k > 1. Split k
            // forwards k blocks more than the floor, so only k <= (best - floor) / flops can beat best.
            const int64_t single = ceilDiv(g + std::max(b.advancePeak, b.in), unit_);
            const int64_t interior = ceilDiv(g + std::max(b.advancePeak, b.in + b.advancePeak), unit_);
            int64_t splits = len - 1;
            if (flops > 0 && best < kInf)
              splits = std::min<int64_t>(splits, static_cast<int64_t>(std::floor((best - floor) / flops)));
            if (interior <= j && splits > 0) {
              const Eigen::Map<const Eigen::ArrayXd> first(atHeld + base + len - 1 - splits, splits);
              const Eigen::Map<const Eigen::ArrayXd> second(row, splits);
              best = std::min(best, (advance.head(splits) + first.reverse() + second).minCoeff());
            } else if (single <= j && splits > 0) {
              best = std::min(best, advance[0] + atHeld[base + len - 2] + row[0]);
            }
          }
        }
        if (pre) {  // loss-first: advance to the loss, then the after-loss problem of the same range
          const int64_t interior = len >= 2 ? b.advancePeak : 0;
          if (ceilDiv(std::max({b.advancePeak, b.in + interior, b.in + m.lossPeak}), unit_) <= j)
            best = std::min(best, floor + row[len - 1]);
        }
        row[base + len - 1] = best;
      }
    }
  }
}

}  // namespace ckpt::optimal_detail
