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
// blocks all have the same model needs only its range lengths: O(L^2 J) time, O(L J) memory). Three tabulations
// fill the same values (optimal_table.h; solve() picks one): dense rows (optimal_level_dp.h), rows kept as their
// frontiers (optimal_frontier_dp.h, where the grid is fine and a row changes at few of its levels) and, for a
// homogeneous chain, a level at a time (optimal_homogeneous_dp.h). Measured (Release, this project's 2-core
// machine): L = 200 heterogeneous blocks at J = 500 in 0.6 s with an 82 MB table; the time grows as L^3 J; a
// homogeneous L = 1000 at J = 500 in 10-50 ms. Longer chains are refused rather than tabulated on fewer than 16
// levels or with more than 1 GiB of dense table.
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
#include "harness/policies/optimal_frontier_dp.h"
#include "harness/policies/optimal_homogeneous_dp.h"
#include "harness/policies/optimal_level_dp.h"
#include "harness/policies/optimal_table.h"
#include "harness/policies/turns.h"
#include "reference/block_sim.h"

namespace ckpt {
namespace {

using namespace optimal_detail;

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
        case Move::kTurn:
          w_.turn(s);
          break;
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
constexpr int64_t kCheapCells = int64_t{1} << 25;   // 256 MiB of doubles
constexpr int64_t kCheapWork = int64_t{400000000};  // cell updates, a second or two
constexpr int64_t kMaxCells = int64_t{1} << 27;     // 1 GiB
constexpr int64_t kMaxWork = int64_t{12000000000};  // about a minute
constexpr int64_t kFewestLevels = 16;               // a coarser grid than this is refused
constexpr int64_t kDenseLevels = 1000;              // a heterogeneous chain's grid tabulated densely up to this

void refuseTooLong(const ChainModel& model, const Family& family, const std::string& policy) {
  if (std::min(kMaxCells / family.rows(), kMaxWork / family.moveCount()) - 1 < kFewestLevels)
    throw InputError(
        "policy '" + policy + "': a chain of " + std::to_string(model.layers) +
        (model.homogeneous() ? " identical" : " heterogeneous") +
        " blocks is too long for the optimal DP (O(L^3 x levels), O(L^2 x levels) when all blocks are alike)");
}

// The plan from a filled table: the schedule of the first move (in choices() order) that reproduces each table
// value, from the root at the budget's level down, or the least-peak schedule where rounding left none as cheap.
template <class Dp>
void planOnGrid(const ChainModel& model, const Family& family, const MinPeakDp& least, const Dp& dp, int64_t budget,
                const OptimalOptions& o, OptimalPlan& plan) {
  const int n = model.layers;
  const Sub root{0, n - 1, true};
  const PeakCost floor = least.at(root);
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
          p = {ch, j - heldLevels(ch, plan.unitBytes), j};
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

  // Three tabulations of the same values, each where it is fastest (Release, this project's 2-core machine): a
  // homogeneous chain level by level (L = 1000 at 500 levels: 10-50 ms, LevelDp 40-220 ms); a coarse grid densely
  // (L = 200 heterogeneous at 500 levels: 0.59 s, frontiers 1.51 s); a fine grid by frontiers (a random verify
  // case's exact grid of thousands of levels, where a frontier holds tens of points).
  if (model.homogeneous())
    planOnGrid(model, family, least, HomogeneousDp(family, model, plan.unitBytes, plan.levels), budget, o, plan);
  else if (plan.levels <= kDenseLevels)
    planOnGrid(model, family, least, LevelDp(family, plan.unitBytes, plan.levels), budget, o, plan);
  else planOnGrid(model, family, least, FrontierDp(family, plan.unitBytes, plan.levels), budget, o, plan);
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
