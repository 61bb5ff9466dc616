// optimal:budget=BYTES — a dynamic program over heterogeneous blocks in the spirit of Rotor (Beaumont,
// Eyraud-Dubois, Herrmann, Joly & Shilova 2019, "Optimal checkpointing for heterogeneous chains"): the schedule
// with the fewest forward FLOPs (so the fewest recompute FLOPs) whose peak activation bytes fit the budget.
//
// The family. A sub-problem is "back-propagate through blocks [s, t] starting from a held x_s", either after the
// loss (g_{t+1} held; ends with g_s) or, for t = L-1, before it (ends with g_s, the loss run inside). Its moves,
// made of turns.h's patterns (so recursive, revolve, store-all and uniform schedules are all members):
//  turn     s = t: tape(s), loss or free x_{s+1}, backward s.
//  tape     tape(s) (x_s freed, its tape kept), solve [s+1, t], backward s.              (Rotor's "store a-bar")
//  split    advance(s, s') keeping x_s, solve [s', t] with x_s held, then [s, s'-1].       (Rotor's "store a")
//  loss-first (before the loss only) advance(s, L), the loss, then solve [s, L-1] after it.
//
// The memory model: each block's program is walked over a BytePool (reference/block_sim.h) exactly as
// planner.cpp walks it, giving its bytes at every point of a forward with or without tape, its tape, its
// backward and its turn; a sub-problem's peak is the max of its move's own high-water and its sub-problems'
// peaks raised by what the move holds meanwhile (x_s for a split, the tape for a tape move). This equals
// planSchedule's peak exactly, except where a block's last op saves its output in its context: then x_{s+1} is
// counted twice while both its handle and the tape hold it, and the model is above the planner (conservative).
//
// The DP. C(sub-problem, j) = least forward FLOPs with peak <= j units, over j = 0..J, tabulated from short
// ranges to long: O(L^2) sub-problems x O(L) moves x J levels = O(L^3 J) time and O(L^2 J) memory (a chain whose
// blocks all have the same model needs only its range lengths: O(L^2 J) time, O(L J) memory). Measured (Release,
// this project's 2-core machine): L = 200 heterogeneous blocks at J = 500 in 2.5-3.5 s with an 82 MB table; the
// time grows as L^3 J (L = 300: about 10 s); a homogeneous L = 1000 takes a quarter of a second. Longer chains
// are refused rather than tabulated on fewer than 16 levels or in more than 1 GiB.
// Every byte count of the model is a multiple of their gcd, so the grid's unit is a whole number of gcds:
// one gcd (the exact grid, nothing rounded) when budget / gcd levels fit the tables within a few seconds; else
// the finest grid that does, never coarser than OptimalOptions::levels (500, Rotor's default). On a coarser grid
// every high-water mark and every amount held across a sub-problem is rounded up to whole units, so whatever the
// grid admits fits the budget, but a schedule that fits only within the rounding may be missed. On the exact
// grid the DP is exact: never more FLOPs than any member of the family within the budget, so never more than
// store-all, uniform, recursive or revolve at their own peaks.
// A second DP of the same moves, in bytes (O(L^3), O(L^2)), gives the least peak of the family (the smallest
// feasible budget) and stands in when rounding leaves the grid without a schedule as cheap as that one.
#include "harness/policies/optimal.h"

#include <algorithm>
#include <limits>
#include <map>
#include <stdexcept>
#include <numeric>
#include <utility>

#include "common/input_error.h"
#include "harness/engine/policy.h"
#include "harness/engine/policy_rule.h"
#include "harness/engine/plan.h"
#include "harness/policies/optimal_family.h"
#include "harness/policies/turns.h"
#include "reference/block_sim.h"

namespace ckpt {
namespace {

using namespace optimal_detail;

int64_t ceilDiv(int64_t a, int64_t b) { return (a + b - 1) / b; }

constexpr double kInf = std::numeric_limits<double>::infinity();

// Least peak, then least FLOPs among those, per sub-problem; exact bytes.
struct PeakCost {
  int64_t peak = std::numeric_limits<int64_t>::max();
  int64_t flops = 0;
  bool operator<(const PeakCost& o) const { return peak != o.peak ? peak < o.peak : flops < o.flops; }
  bool operator==(const PeakCost&) const = default;
};

class MinPeakDp {
 public:
  explicit MinPeakDp(const Family& f) : f_(f), table_(static_cast<size_t>(f.rows())) {
    f_.states([&](const Sub& u) {
      PeakCost best;
      f_.choices(u, [&](const Choice& c) { best = std::min(best, value(c)); });
      cell(u) = best;
    });
  }
  const PeakCost& at(const Sub& u) const { return table_[static_cast<size_t>(f_.key(u))]; }
  PeakCost value(const Choice& c) const {
    PeakCost v{c.peak, c.flops};
    if (c.a.valid()) {
      v.peak = std::max(v.peak, c.held + at(c.a).peak);
      v.flops += at(c.a).flops;
    }
    if (c.b.valid()) {
      v.peak = std::max(v.peak, at(c.b).peak);
      v.flops += at(c.b).flops;
    }
    return v;
  }

 private:
  PeakCost& cell(const Sub& u) { return table_[static_cast<size_t>(f_.key(u))]; }
  const Family& f_;
  std::vector<PeakCost> table_;
};

// C(sub-problem, j) for j = 0..levels, least forward FLOPs with peak <= j units (kInf: none). FLOPs are summed in
// doubles (exact below 2^53) so the inner loops vectorise; the reconstruction repeats the same additions. Rows do
// not increase with j, so a move is relaxed only from the first level at which it and its sub-problems are all
// feasible, and only up to the level at which taping every block fits: from there the row is the least FLOPs any
// move reaches (every forward once), filled, not relaxed. The same values as relaxing every level.
// The table is filled a block of levels at a time, every row in states() order within a block: a move at level j
// reads its sub-problems (rows before it in that order) at levels <= j, which this block or an earlier one has
// computed, and each cell sees the same moves in the same order as row by row, so the values are the same bits.
// Row by row, each of a long chain's rows read every shorter row whole, several MB beyond the caches (the DP ran
// at memory speed, 40% of `verify`); a block's slices of all the rows fit in L2.
class LevelDp {
 public:
  LevelDp(const Family& f, int64_t unit, int64_t levels)
      : f_(f), unit_(unit), width_(levels + 1), table_(static_cast<size_t>(f.rows() * width_), kInf),
        first_(static_cast<size_t>(f.rows()), width_), allTaped_(static_cast<size_t>(f.rows()), 0),
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
  double at(const Sub& u, int64_t j) const { return row(u)[j]; }
  int64_t heldLevels(const Choice& c) const { return ceilDiv(c.held, unit_); }
  double value(const Choice& c, int64_t j) const {
    if (ceilDiv(c.peak, unit_) > j) return kInf;
    double v = static_cast<double>(c.flops);
    if (c.a.valid()) {
      const int64_t ja = j - heldLevels(c);
      v = ja < 0 ? kInf : v + at(c.a, ja);
    }
    if (c.b.valid()) v = v + at(c.b, j);
    return v;
  }

 private:
  double* row(const Sub& u) { return table_.data() + f_.key(u) * width_; }
  const double* row(const Sub& u) const { return table_.data() + f_.key(u) * width_; }
  int64_t first(const Sub& u) const { return first_[static_cast<size_t>(f_.key(u))]; }

  // The least level at which the move can be finite: its own high-water and both sub-problems feasible.
  int64_t start(const Choice& c) const {
    const int64_t from = std::max(ceilDiv(c.peak, unit_), c.a.valid() ? heldLevels(c) + first(c.a) : 0);
    return c.b.valid() ? std::max(from, first(c.b)) : from;
  }

  // The level from which taping every block of u (a turn at its last) fits the grid, as value() rounds it.
  int64_t allTapedLevel(const Sub& u) {
    int64_t level = 0;
    f_.choices(u, [&](const Choice& c) {
      if (c.move == Move::kTurn) level = ceilDiv(c.peak, unit_);
      if (c.move == Move::kTape)
        level = std::max(ceilDiv(c.peak, unit_), heldLevels(c) + allTaped_[static_cast<size_t>(f_.key(c.a))]);
    });
    return allTaped_[static_cast<size_t>(f_.key(u))] = level;
  }

  // out[j] = min(out[j], the move's value at j) for from <= j < end.
  void relax(double* __restrict out, const Choice& c, int64_t from, int64_t end) {
    const double flops = static_cast<double>(c.flops);
    if (c.a.valid()) {
      const int64_t shift = heldLevels(c);
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

  const Family& f_;
  int64_t unit_;
  int64_t width_;
  std::vector<double> table_;
  std::vector<int64_t> first_;     // per row: its first level that may be finite (width_: none)
  std::vector<int64_t> allTaped_;  // per row: allTapedLevel
  std::vector<int64_t> settled_;   // per row: the last level it relaxes, min(levels, allTapedLevel)
  static constexpr int64_t kBlockBytes = int64_t{1} << 20;  // one block's slices of every row
};

// Emits the schedule of the chosen moves from the root down, and the model's peak of it.
class Writer {
 public:
  explicit Writer(Schedule& s) : w_(s) {}

  // pick(sub-problem, level) -> the move taken there, and the levels its sub-problems get.
  template <class Pick>
  int64_t write(const Sub& root, int64_t level, Pick&& pick) {
    struct Task {
      enum { kSolve, kBackward } kind;
      Sub u;
      int64_t level;
      int node;  // kSolve: the tree node it fills
    };
    std::vector<Node> nodes;
    nodes.push_back({});
    std::vector<Task> todo = {{Task::kSolve, root, level, 0}};
    while (!todo.empty()) {
      const Task task = todo.back();
      todo.pop_back();
      if (task.kind == Task::kBackward) {
        w_.backward(task.u.s);
        continue;
      }
      const auto [c, levelA, levelB] = pick(task.u, task.level);
      const size_t at = static_cast<size_t>(task.node);
      nodes[at].peak = c.peak;
      nodes[at].held = c.held;
      const int s = task.u.s;
      int childA = -1, childB = -1;
      if (c.a.valid()) {
        childA = nodes[at].a = static_cast<int>(nodes.size());
        nodes.push_back({});
      }
      if (c.b.valid()) {
        childB = nodes[at].b = static_cast<int>(nodes.size());
        nodes.push_back({});
      }
      switch (c.move) {
        case Move::kTurn: w_.turn(s); break;
        case Move::kTape:
          w_.tape(s);
          todo.push_back({Task::kBackward, task.u, 0, -1});
          todo.push_back({Task::kSolve, c.a, levelA, childA});
          break;
        case Move::kSplit:
          w_.advance(s, c.split);
          todo.push_back({Task::kSolve, c.b, levelB, childB});
          todo.push_back({Task::kSolve, c.a, levelA, childA});
          break;
        case Move::kLossFirst:
          w_.advance(s, c.split);
          w_.loss();
          todo.push_back({Task::kSolve, c.b, levelB, childB});
          break;
      }
    }
    // Children come after their parents: fold the peaks bottom-up.
    for (size_t i = nodes.size(); i-- > 0;) {
      Node& n = nodes[i];
      if (n.a >= 0) n.peak = std::max(n.peak, n.held + nodes[static_cast<size_t>(n.a)].peak);
      if (n.b >= 0) n.peak = std::max(n.peak, nodes[static_cast<size_t>(n.b)].peak);
    }
    return nodes[0].peak;
  }

 private:
  struct Node {
    int64_t peak = 0, held = 0;
    int a = -1, b = -1;
  };
  TurnWriter w_;
};

struct Picked {
  Choice c;
  int64_t levelA = 0, levelB = 0;
};

std::string policyText(int64_t budget) { return "optimal:budget=" + std::to_string(budget); }

// Table sizes: a grid finer than o.levels only within the cheap caps, and never beyond the larger ones.
constexpr int64_t kCheapCells = int64_t{1} << 25;      // 256 MiB of doubles
constexpr int64_t kCheapWork = int64_t{400000000};     // cell updates, a second or two
constexpr int64_t kMaxCells = int64_t{1} << 27;        // 1 GiB
constexpr int64_t kMaxWork = int64_t{12000000000};     // about a minute
constexpr int64_t kFewestLevels = 16;                  // a coarser grid than this is refused

void refuseTooLong(const ChainModel& model, const Family& family, const std::string& policy) {
  if (std::min(kMaxCells / family.rows(), kMaxWork / family.moveCount()) - 1 < kFewestLevels)
    throw InputError("policy '" + policy + "': a chain of " + std::to_string(model.layers) +
                     (model.homogeneous() ? " identical" : " heterogeneous") +
                     " blocks is too long for the optimal DP (O(L^3 x levels), O(L^2 x levels) when all blocks are alike)");
}

// The DP on a chain's model: the plan is a function of the model, the budget and the grid options alone.
OptimalPlan solve(const ChainModel& model, int64_t budget, const OptimalOptions& o) {
  const int n = model.layers;
  const Family family(model);
  const int64_t rows = family.rows(), moves = family.moveCount();

  const MinPeakDp least(family);
  const Sub root{0, n - 1, true};
  const PeakCost floor = least.at(root);
  if (budget < floor.peak)
    throw InputError("policy '" + policyText(budget) + "': infeasible; the smallest feasible budget is " +
                     std::to_string(floor.peak) + " bytes");

  // The grid: as fine as the cheap caps allow (exact when they allow it), never coarser than o.levels.
  const int64_t gcd = model.gcdBytes();
  const int64_t exactLevels = budget / gcd;
  const int64_t cheap = std::min(kCheapCells / rows, kCheapWork / moves) - 1;
  int64_t levels = o.refine ? std::max<int64_t>(o.levels, cheap) : o.levels;
  levels = std::min({levels, exactLevels, kMaxCells / rows - 1, kMaxWork / moves - 1});
  OptimalPlan plan;
  plan.unitBytes = gcd * ceilDiv(std::max<int64_t>(exactLevels, 1), std::max<int64_t>(levels, 1));
  plan.levels = budget / plan.unitBytes;
  plan.exactGrid = plan.unitBytes == gcd;

  const LevelDp dp(family, plan.unitBytes, plan.levels);
  Schedule& s = plan.schedule;
  s.policy = policyText(budget);
  s.layers = n;
  s.keep = o.keep;
  Writer writer(s);
  const double gridFlops = dp.at(root, plan.levels);
  if (gridFlops <= static_cast<double>(floor.flops)) {
    plan.forwardFlops = static_cast<int64_t>(gridFlops);
    plan.peakBytes = writer.write(root, plan.levels, [&](const Sub& u, int64_t j) {
      const double want = dp.at(u, j);
      Picked p;
      bool found = false;
      family.choices(u, [&](const Choice& ch) {
        if (!found && dp.value(ch, j) == want) {
          p = {ch, j - dp.heldLevels(ch), j};
          found = true;
        }
      });
      if (!found) throw std::logic_error("optimal: no move reproduces the table's value");
      return p;
    });
  } else {
    // Rounding left no grid schedule as cheap as the least-peak one (or none at all): take that one.
    plan.minPeakFallback = true;
    plan.forwardFlops = floor.flops;
    plan.peakBytes = writer.write(root, 0, [&](const Sub& u, int64_t) {
      const PeakCost want = least.at(u);
      Picked p;
      bool found = false;
      family.choices(u, [&](const Choice& ch) {
        if (!found && least.value(ch) == want) {
          p = {ch, 0, 0};
          found = true;
        }
      });
      if (!found) throw std::logic_error("optimal: no move reproduces the least peak");
      return p;
    });
  }
  int64_t once = 0;
  for (int i = 0; i < n; ++i) once += model[i].flops;
  plan.recomputeFlops = plan.forwardFlops - once;
  return plan;
}

// Verify asks for the same plan up to three times a case (the optimal run's schedule, property 4's comparison at a
// rival's peak, property 5's check of the DP against the planner), so each thread keeps its last few.
struct RecentPlan {
  ChainModel model;
  int64_t budget = 0;
  int levels = 0;
  bool refine = false;
  OptimalPlan plan;
};
constexpr size_t kRecentPlans = 4;
thread_local std::vector<RecentPlan> recentPlans;

}  // namespace

OptimalPlan optimalPlan(const ChainCost& c, int64_t budget, const OptimalOptions& o) {
  if (budget < 1) throw InputError("policy '" + policyText(budget) + "': budget must be >= 1 byte");
  if (o.levels < 1) throw InputError("policy '" + policyText(budget) + "': levels must be >= 1");
  if (!o.keep.empty() && static_cast<int>(o.keep.size()) != c.layers())
    throw InputError("policy '" + policyText(budget) + "': " + std::to_string(o.keep.size()) + " keep masks for " +
                     std::to_string(c.layers()) + " blocks");
  ChainModel model = chainModel(c, o.keep);
  refuseTooLong(model, Family(model), policyText(budget));
  OptimalPlan plan;
  const auto same = [&](const RecentPlan& r) {
    return r.budget == budget && r.levels == o.levels && r.refine == o.refine && r.model == model;
  };
  if (const auto it = std::find_if(recentPlans.begin(), recentPlans.end(), same); it != recentPlans.end()) {
    plan = it->plan;
  } else {
    plan = solve(model, budget, o);  // throws on an infeasible budget: nothing kept
    if (recentPlans.size() == kRecentPlans) recentPlans.erase(recentPlans.begin());
    recentPlans.push_back({std::move(model), budget, o.levels, o.refine, plan});
  }
  plan.schedule.keep = o.keep;  // masks that give the same model give the same schedule
  return plan;
}

int64_t optimalMinBudget(const ChainCost& c, const std::vector<KeepMask>& keep) {
  const ChainModel model = chainModel(c, keep);
  const Family family(model);
  refuseTooLong(model, family, "optimal");
  return MinPeakDp(family).at(Sub{0, c.layers() - 1, true}).peak;
}

int64_t optimalMinBudget(const ChainCost& c) { return optimalMinBudget(c, {}); }

Schedule optimalSchedule(const ChainCost& c, int64_t budgetBytes) { return optimalPlan(c, budgetBytes).schedule; }

// The record. defaultPolicies(): a budget halfway between the smallest feasible and store-all's peak, so the DP has
// to choose. verify draws the budget as a permille of that range, with the masks of the selective part it is
// composed with. Property 4: the measured peak stays within the budget.
PolicyRule optimalRule() {
  using KeepFn = std::function<std::vector<KeepMask>()>;
  PolicyRule r;
  r.name = "optimal";
  r.params = {{"budget", true, "budget=BYTES (BYTES >= 1)"}};
  r.make = [](const PolicySpec& p, const ChainCost& c, const std::vector<KeepMask>& keep) {
    return optimalPlan(c, intParam(p, "budget"), OptimalOptions{.keep = keep}).schedule;
  };
  r.byDefault = [](const ChainCost& c) {
    const int64_t full = planSchedule(storeAllSchedule(c), c).peakActivationBytes;
    const int64_t least = std::min(full, optimalMinBudget(c));
    return std::vector<std::string>{policyText(least + (full - least) / 2)};
  };
  r.quadraticDefault = true;
  r.draw = [](const PolicyDraw& d, const ChainCost& c, const KeepFn& keepOf) {
    Schedule all = storeAllSchedule(c);
    all.keep = keepOf();
    const int64_t full = planSchedule(all, c).peakActivationBytes;
    const int64_t least = std::min(full, optimalMinBudget(c, all.keep));
    return policyText(least + (full - least) * std::clamp(d.optimalBudget, 0, 1000) / 1000);
  };
  r.drawComposed = true;
  r.bound = budgetBound;
  return r;
}

}  // namespace ckpt
