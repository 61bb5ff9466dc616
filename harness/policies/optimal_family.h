// The optimal policy's family of schedules and its memory model (harness/policies/optimal.cpp says what the DP
// does with them): what the DP knows of each block from a BytePool walk of its program, the chain's model, the
// sub-problems and the moves that solve them. Internal to the optimal policy.
#pragma once
#include <algorithm>
#include <cstdint>
#include <vector>

#include "harness/engine/chain_cost.h"
#include "reference/block_sim.h"

namespace ckpt::optimal_detail {

// What the DP knows of one block, from a BytePool walk of its program in the planner's order.
struct BlockModel {
  int64_t in = 0;           // x_i (and g_i)
  int64_t out = 0;          // x_{i+1} (and g_{i+1})
  int64_t flops = 0;        // one forward
  int64_t advancePeak = 0;  // forward without tape from a held x_i: high-water, x_i and x_{i+1} included
  int64_t tapePeak = 0;     // forward with tape from a held x_i: high-water, x_i included
  int64_t tapeBytes = 0;    // what the tape alone holds once x_i's and x_{i+1}'s handles are dropped
  int64_t backPeak = 0;     // backward (op-level recompute first) from the tape and g_{i+1}: high-water
  int64_t turnPeak = 0;     // turn(i) after the loss, from x_i and g_{i+1}: high-water
  bool operator==(const BlockModel&) const = default;
};

BlockModel blockModel(const BlockProgram& p, const KeepMask& keep);

// kLoss as planner.cpp walks it from x_L's buffer; returns g_L's.
int simLoss(BytePool& pool, const LossCost& loss, int xL);

struct ChainModel {
  int layers = 0;
  std::vector<BlockModel> models;  // distinct by value
  std::vector<int> modelOf;        // per block
  int64_t lossPeak = 0;            // the loss from a held x_L: x_L, its context, g_L
  int64_t lastTurnPeak = 0;        // turn(L-1) with the loss, from x_{L-1}

  const BlockModel& operator[](int i) const { return models[static_cast<size_t>(modelOf[static_cast<size_t>(i)])]; }
  bool homogeneous() const { return models.size() == 1; }
  bool operator==(const ChainModel&) const = default;
  // Every byte count the DP adds or compares is a sum of these.
  int64_t gcdBytes() const {
    int64_t g = std::gcd(lossPeak, lastTurnPeak);
    for (const auto& m : models)
      for (int64_t v : {m.in, m.out, m.advancePeak, m.tapePeak, m.tapeBytes, m.backPeak, m.turnPeak})
        g = std::gcd(g, v);
    return std::max<int64_t>(g, 1);
  }
};

ChainModel chainModel(const ChainCost& c, const std::vector<KeepMask>& keep);

// A sub-problem: back-propagate through [s, t] from a held x_s; `pre`: before the loss (then t = L-1).
struct Sub {
  int s = -1, t = -1;
  bool pre = false;
  bool valid() const { return s >= 0; }
};

enum class Move { kTurn, kTape, kSplit, kLossFirst };

struct Choice {
  Move move = Move::kTurn;
  int split = 0;      // kSplit: the checkpoint s'
  int64_t peak = 0;   // high-water of the instructions the move runs itself, above what was held before it
  int64_t flops = 0;  // forward FLOPs the move runs itself
  Sub a;              // solved first, with `held` more bytes held than at the sub-problem's start
  int64_t held = 0;
  Sub b;  // solved second
};

class Family {
 public:
  explicit Family(const ChainModel& m) : m_(m), n_(m.layers) {}

  int64_t rows() const {
    const int64_t n = n_;
    return m_.homogeneous() ? 2 * n : n * (n + 1) / 2 + n;
  }
  // A homogeneous chain's sub-problems depend only on their length and on the loss.
  int64_t key(const Sub& u) const {
    const int64_t s = u.s, t = u.t, n = n_;
    if (m_.homogeneous()) return u.pre ? n + (t - s) : t - s;
    return u.pre ? n * (n + 1) / 2 + s : t * (t + 1) / 2 + s;
  }
  // Moves tried over the whole table (for sizing the work).
  int64_t moveCount() const {
    const int64_t n = n_;
    return m_.homogeneous() ? n * (n + 2) : n * (n + 1) * (n + 2) / 6 + n * (n + 3) / 2;
  }

  // Every tabulated sub-problem, each after those its moves use.
  template <class F>
  void states(F&& f) const {
    for (int len = 1; len <= n_; ++len) {
      const int last = m_.homogeneous() ? 0 : n_ - len;
      for (int s = 0; s <= last; ++s) f(Sub{s, s + len - 1, false});
      f(Sub{n_ - len, n_ - 1, true});  // uses the after-loss problem of the same range (loss-first)
    }
  }

  template <class F>
  void choices(const Sub& u, F&& f) const {
    const int s = u.s, t = u.t;
    const BlockModel& bs = m_[s];
    const int64_t g = u.pre ? 0 : m_[t].out;  // g_{t+1}, held throughout
    if (s == t) {
      f(Choice{Move::kTurn, 0, u.pre ? m_.lastTurnPeak : bs.turnPeak, bs.flops, {}, 0, {}});
    } else {
      f(Choice{
          Move::kTape, 0, std::max(g + bs.tapePeak, bs.backPeak), bs.flops, Sub{s + 1, t, u.pre}, bs.tapeBytes, {}});
    }
    int64_t flops = bs.flops;  // blocks s..s'-1
    int64_t interior = 0;      // advance high-water of blocks s+1..s'-1, x_s held besides
    for (int split = s + 1; split <= t; ++split) {
      const int64_t peak = g + std::max(bs.advancePeak, bs.in + interior);
      f(Choice{Move::kSplit, split, peak, flops, Sub{split, t, u.pre}, bs.in, Sub{s, split - 1, false}});
      interior = std::max(interior, m_[split].advancePeak);
      flops += m_[split].flops;
    }
    if (u.pre) {
      const int64_t peak = std::max({bs.advancePeak, bs.in + interior, bs.in + m_.lossPeak});
      f(Choice{Move::kLossFirst, n_, peak, flops, {}, 0, Sub{s, t, false}});
    }
  }

 private:
  const ChainModel& m_;
  int n_;
};

}  // namespace ckpt::optimal_detail
