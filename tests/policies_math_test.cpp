// The arithmetic of the recompute policies, checked against brute force and against the planner:
//  - revolve: numforw's closed form equals the minimum of its recurrence; the split rule attains it; schedules
//    run exactly numforw(L, C) + L forwards and never hold more than C checkpoints; C >= L-1 is
//    checkpoint-every-layer;
//  - recursive: F(L) forwards, peak growing by at most one boundary per doubling of L;
//  - optimal: its memory model equals the planner, it fits its budget, it never recomputes at store-all's peak,
//    it never recomputes more than store-all, uniform, recursive or revolve at their own peaks, and an
//    infeasible budget names the smallest feasible one.
#include <gtest/gtest.h>
#include <rapidcheck/gtest.h>

#include <chrono>
#include <cmath>
#include <functional>
#include <map>

#include "cases/generators.h"
#include "common/input_error.h"
#include "harness/engine/chain_cost.h"
#include "harness/engine/plan.h"
#include "harness/engine/policy.h"
#include "harness/policies/optimal.h"
#include "harness/policies/revolve_math.h"
#include "reference/chain.h"

namespace ckpt {

namespace {

// --- chains -------------------------------------------------------------------------------------------------

CaseSpec specOf(std::vector<BlockSpec> blocks, int64_t batch = 2, int64_t seq = 4, int64_t width = 8) {
  CaseSpec c;
  c.batch = batch;
  c.seq = seq;
  c.width = width;
  c.blocks = std::move(blocks);
  return c;
}

BlockSpec block(BlockKind k, int heads = 2) {
  BlockSpec b;
  b.kind = k;
  b.heads = heads;
  return b;
}

ChainCost costOf(const CaseSpec& spec) {
  return spec.dtype == DType::kFloat ? chainCost(buildChain<float>(spec)) : chainCost(buildChain<double>(spec));
}

ChainCost homogeneous(BlockKind k, int layers) { return homogeneousChainCost(specOf({block(k)}), layers); }

// Mixed kinds, a mix that repeats with period 3 (mlp, residual-bn, transformer).
ChainCost mixed(int layers, double dropout = 0.0) {
  std::vector<BlockSpec> bs;
  const BlockKind kinds[] = {blockKind("mlp"), blockKind("residual-bn"), blockKind("transformer")};
  for (int i = 0; i < layers; ++i) bs.push_back(block(kinds[i % 3]));
  CaseSpec s = specOf(bs);
  s.dropout = dropout;
  return costOf(s);
}

// The project's random cases (cases/generators.h), at most `maxBlocks` long.
rc::Gen<CaseSpec> genSpec(int maxBlocks) {
  GenLimits lim;
  lim.maxBlocks = maxBlocks;
  return genCase(lim);
}

int forwards(const Schedule& s) {
  int n = 0;
  for (const Instr& i : s.instrs) n += i.kind == InstrKind::kForward;
  return n;
}

// The most checkpoints held at once, read before every forward, loss and backward: every held boundary except
// the state being advanced (a forward's input that the previous forward produced, or x_L at the loss).
int maxCheckpoints(const Schedule& s) {
  std::vector<char> held(static_cast<size_t>(s.layers) + 1, 0);
  held[0] = 1;
  int count = 1, most = 0, produced = -1;
  for (const Instr& in : s.instrs) {
    switch (in.kind) {
      case InstrKind::kForward:
        most = std::max(most, count - (produced == in.block ? 1 : 0));
        held[static_cast<size_t>(in.block) + 1] = 1;
        ++count;
        produced = in.block + 1;
        break;
      case InstrKind::kFree:
        held[static_cast<size_t>(in.block)] = 0;
        --count;
        break;
      case InstrKind::kLoss:
        most = std::max(most, count - (produced == s.layers ? 1 : 0));
        held[static_cast<size_t>(s.layers)] = 0;
        --count;
        produced = -1;
        break;
      case InstrKind::kBackward:
        most = std::max(most, count);
        produced = -1;
        break;
    }
  }
  return most;
}

std::string body(const Schedule& s) {
  std::string out;
  for (const Instr& i : s.instrs) out += toText(i) + "\n";
  return out;
}

// --- revolve arithmetic ---------------------------------------------------------------------------------------

// The recurrence numforw solves, by brute force over every first checkpoint.
int64_t bruteNumforw(int64_t l, int64_t c, std::map<std::pair<int64_t, int64_t>, int64_t>& memo) {
  if (l == 1) return 0;
  if (c == 1) return l * (l - 1) / 2;
  const auto key = std::make_pair(l, c);
  if (auto it = memo.find(key); it != memo.end()) return it->second;
  int64_t best = INT64_MAX;
  for (int64_t m = 1; m < l; ++m)
    best = std::min(best, m + bruteNumforw(l - m, c - 1, memo) + bruteNumforw(m, c, memo));
  return memo[key] = best;
}

TEST(Revolve, numforwClosedFormEqualsTheBruteForceMinimum) {
  std::map<std::pair<int64_t, int64_t>, int64_t> memo;
  for (int64_t c = 1; c <= 9; ++c)
    for (int64_t l = 1; l <= 90; ++l)
      ASSERT_EQ(revolveNumforw(l, c), bruteNumforw(l, c, memo)) << "l " << l << " c " << c;
}

TEST(Revolve, numforwKnownValues) {
  EXPECT_EQ(revolveNumforw(1, 1), 0);
  EXPECT_EQ(revolveNumforw(10, 1), 45);  // only x_0: block i is advanced i times
  EXPECT_EQ(revolveNumforw(10, 9), 9);   // C >= L-1: every block but the last advanced once
  EXPECT_EQ(revolveNumforw(10, 100), 9);
  EXPECT_EQ(revolveNumforw(3, 2), 2);
  EXPECT_EQ(revolveNumforw(6, 2), 8);  // r = 2 (beta(2, 2) = 6): 2 * 6 - beta(3, 1) = 12 - 4
  EXPECT_EQ(revolveBeta(2, 2), 6);
  EXPECT_EQ(revolveRepetitions(6, 2), 2);
  EXPECT_EQ(revolveNumforw(1000000, 1000000), 999999);
  EXPECT_EQ(revolveRepetitions(1000000, 100), 4);
}

TEST(Revolve, theSplitRuleAttainsNumforw) {
  for (int64_t c = 2; c <= 12; ++c)
    for (int64_t l = 2; l <= 400; ++l) {
      const int64_t m = revolveSplit(l, c);
      ASSERT_GE(m, 1);
      ASSERT_LT(m, l);
      ASSERT_EQ(m + revolveNumforw(l - m, c - 1) + revolveNumforw(m, c), revolveNumforw(l, c))
          << "l " << l << " c " << c;
    }
}

TEST(Revolve, schedulesRunNumforwPlusLForwardsWithinTheirSlots) {
  const ChainCost het = mixed(24);
  for (int layers = 1; layers <= 24; ++layers) {
    const ChainCost hom = homogeneous(blockKind("mlp"), layers);
    for (int slots = 1; slots <= 9; ++slots) {
      const Schedule s = revolveSchedule(hom, slots);
      SCOPED_TRACE("L " + std::to_string(layers) + " C " + std::to_string(slots));
      ASSERT_NO_THROW(validateSchedule(s, hom));
      const Plan p = planSchedule(s, hom);
      EXPECT_EQ(p.forwardEvals, revolveNumforw(layers, slots) + layers);
      EXPECT_EQ(forwards(s), p.forwardEvals);
      EXPECT_EQ(static_cast<int64_t>(s.instrs.size()), 2 * p.forwardEvals + layers + 1);
      EXPECT_LE(maxCheckpoints(s), slots);
      EXPECT_EQ(p.flops.recompute, revolveNumforw(layers, slots) * hom.block(0).forwardFlops);
    }
  }
  // Heterogeneous: costs are ignored, the schedule is still valid and as long.
  for (int slots = 1; slots <= 6; ++slots) {
    const Schedule s = revolveSchedule(het, slots);
    ASSERT_NO_THROW(validateSchedule(s, het));
    EXPECT_EQ(planSchedule(s, het).forwardEvals, revolveNumforw(24, slots) + 24);
  }
}

TEST(Revolve, enoughSlotsIsCheckpointEveryLayer) {
  for (int layers : {1, 2, 5, 17}) {
    const ChainCost c = homogeneous(blockKind("mlp"), layers);
    for (int slots : {layers - 1, layers, layers + 5}) {
      if (slots < 1) continue;
      const Schedule s = revolveSchedule(c, slots);
      EXPECT_EQ(forwards(s), 2 * layers - 1);
      // Forward sweep keeps x_0..x_{L-2}, tapes only the last block; every other block is taped once more.
      std::string want;
      for (int i = 0; i + 1 < layers; ++i) want += "forward " + std::to_string(i) + "\n";
      want += "forward " + std::to_string(layers - 1) + " tape\nfree x " + std::to_string(layers - 1) + "\nloss\n";
      want += "backward " + std::to_string(layers - 1) + "\n";
      for (int i = layers - 2; i >= 0; --i)
        want += "forward " + std::to_string(i) + " tape\nfree x " + std::to_string(i) + "\nfree x " +
                std::to_string(i + 1) + "\nbackward " + std::to_string(i) + "\n";
      EXPECT_EQ(body(s), want) << "L " << layers << " C " << slots;
    }
  }
}

TEST(Revolve, handWorkedThreeBlocksTwoSlots) {
  const ChainCost c = homogeneous(blockKind("mlp"), 3);
  // numforw(3, 2) = 2: advance 0 (x_0 kept), advance 1 (x_1 kept: the second slot), firsturn 2, youturns.
  EXPECT_EQ(body(revolveSchedule(c, 2)),
            "forward 0\nforward 1\nforward 2 tape\nfree x 2\nloss\nbackward 2\n"
            "forward 1 tape\nfree x 1\nfree x 2\nbackward 1\n"
            "forward 0 tape\nfree x 0\nfree x 1\nbackward 0\n");
  // One slot: x_0 only; block i is advanced i times.
  EXPECT_EQ(body(revolveSchedule(c, 1)),
            "forward 0\nforward 1\nfree x 1\nforward 2 tape\nfree x 2\nloss\nbackward 2\n"
            "forward 0\nforward 1 tape\nfree x 1\nfree x 2\nbackward 1\n"
            "forward 0 tape\nfree x 0\nfree x 1\nbackward 0\n");
}

TEST(Revolve, rejectsZeroSlotsAndSchedulesTooLongToHold) {
  EXPECT_THROW(revolveSchedule(homogeneous(blockKind("mlp"), 3), 0), InputError);
  EXPECT_THROW(revolveSchedule(homogeneous(blockKind("mlp"), 1000000), 1), InputError);  // 5 10^11 forwards
}

TEST(Revolve, aMillionBlocksIsQuickToSchedule) {
  const ChainCost c = homogeneous(blockKind("mlp"), 1000000);
  const Schedule s = revolveSchedule(c, 100);
  EXPECT_EQ(forwards(s), revolveNumforw(1000000, 100) + 1000000);
}

// --- recursive ------------------------------------------------------------------------------------------------

int64_t recursiveForwards(int64_t n) {
  return n == 1 ? 1 : n / 2 + recursiveForwards(n - n / 2) + recursiveForwards(n / 2);
}

TEST(Recursive, handWorkedFourBlocks) {
  EXPECT_EQ(body(recursiveSchedule(homogeneous(blockKind("mlp"), 4))),
            "forward 0\nforward 1\nfree x 1\nforward 2\n"
            "forward 3 tape\nfree x 3\nloss\nbackward 3\n"
            "forward 2 tape\nfree x 2\nfree x 3\nbackward 2\n"
            "forward 0\nforward 1 tape\nfree x 1\nfree x 2\nbackward 1\n"
            "forward 0 tape\nfree x 0\nfree x 1\nbackward 0\n");
}

TEST(Recursive, validWithTheRecurrencesForwardCount) {
  for (int layers = 1; layers <= 70; ++layers) {
    const ChainCost c = layers % 2 ? homogeneous(blockKind("mlp"), layers) : mixed(layers);
    const Schedule s = recursiveSchedule(c);
    ASSERT_NO_THROW(validateSchedule(s, c)) << layers;
    EXPECT_EQ(planSchedule(s, c).forwardEvals, recursiveForwards(layers)) << layers;
    EXPECT_EQ(static_cast<int64_t>(s.instrs.size()), 2 * recursiveForwards(layers) + layers + 1);
  }
}

TEST(Recursive, peakGrowsByAtMostOneBoundaryPerDoubling) {
  for (BlockKind k : {blockKind("mlp"), blockKind("transformer")}) {
    int64_t last = 0;
    const int64_t boundary = homogeneous(k, 1).inputBytes;
    for (int e = 0; e <= 14; ++e) {
      const ChainCost c = homogeneous(k, 1 << e);
      const int64_t peak = planSchedule(recursiveSchedule(c), c).peakActivationBytes;
      if (e > 0) {
        EXPECT_GE(peak, last);
        EXPECT_LE(peak - last, boundary) << "L 2^" << e;
      }
      last = peak;
    }
  }
}

// --- optimal --------------------------------------------------------------------------------------------------

struct Judged {
  int64_t peak, recompute;
};
Judged judge(const Schedule& s, const ChainCost& c) {
  const Plan p = planSchedule(s, c);
  return {p.peakActivationBytes, p.flops.recompute};
}

std::vector<std::pair<std::string, Schedule>> rivals(const ChainCost& c) {
  std::vector<std::pair<std::string, Schedule>> out;
  const int n = c.layers();
  out.emplace_back("store-all", storeAllSchedule(c));
  out.emplace_back("recursive", recursiveSchedule(c));
  for (int k = 1; k <= n; ++k) out.emplace_back("uniform:k=" + std::to_string(k), uniformSchedule(c, k));
  for (int slots = 1; slots <= n; ++slots)
    out.emplace_back("revolve:slots=" + std::to_string(slots), revolveSchedule(c, slots));
  return out;
}

// Optimal at each rival's peak: fits, matches its own model, recomputes no more.
void checkDominates(const ChainCost& c) {
  for (const auto& [name, s] : rivals(c)) {
    const Judged r = judge(s, c);
    const OptimalPlan o = optimalPlan(c, r.peak);
    const Judged j = judge(o.schedule, c);
    RC_ASSERT(j.peak <= r.peak);
    RC_ASSERT(j.peak == o.peakBytes);
    RC_ASSERT(j.recompute == o.recomputeFlops);
    if (j.recompute > r.recompute)
      RC_FAIL(name + ": optimal recomputes " + std::to_string(j.recompute) + " > " + std::to_string(r.recompute));
  }
}

TEST(Optimal, atStoreAllsPeakItRecomputesNothing) {
  for (const ChainCost& c : {homogeneous(blockKind("mlp"), 12), homogeneous(blockKind("residual-bn"), 9),
                             homogeneous(blockKind("transformer"), 7), mixed(10), mixed(8, 0.1)}) {
    const int64_t full = judge(storeAllSchedule(c), c).peak;
    const OptimalPlan o = optimalPlan(c, full);
    const Judged j = judge(o.schedule, c);
    EXPECT_EQ(j.recompute, 0);
    EXPECT_LE(j.peak, full);
    EXPECT_EQ(j.peak, o.peakBytes);
    EXPECT_TRUE(o.exactGrid);
  }
}

TEST(Optimal, neverRecomputesMoreThanAnotherPolicyAtItsPeakOnFixedChains) {
  std::vector<std::pair<std::string, ChainCost>> chains;
  for (BlockKind k : blockKinds())
    for (int layers : {1, 2, 3, 5, 8, 13, 20})
      chains.emplace_back(std::string(blockKindName(k)) + " x " + std::to_string(layers), homogeneous(k, layers));
  for (int layers : {4, 9, 14}) chains.emplace_back("mixed x " + std::to_string(layers), mixed(layers, 0.1));
  for (const auto& [label, c] : chains) {
    SCOPED_TRACE(label);
    for (const auto& [name, s] : rivals(c)) {
      const Judged r = judge(s, c);
      const OptimalPlan o = optimalPlan(c, r.peak);
      const Judged j = judge(o.schedule, c);
      EXPECT_TRUE(o.exactGrid) << name;
      EXPECT_LE(j.peak, r.peak) << name;
      EXPECT_EQ(j.peak, o.peakBytes) << name;
      EXPECT_LE(j.recompute, r.recompute) << name;
    }
  }
}

RC_GTEST_PROP(Optimal, neverRecomputesMoreThanAnotherPolicyAtItsPeak, ()) {
  const CaseSpec spec = *genSpec(12);
  RC_TAG(spec.blocks.size());
  checkDominates(costOf(spec));
}

RC_GTEST_PROP(Optimal, fitsAnyFeasibleBudgetOnEitherGrid, ()) {
  const CaseSpec spec = *genSpec(12);
  const ChainCost c = costOf(spec);
  const int64_t least = optimalMinBudget(c);
  const int64_t full = judge(storeAllSchedule(c), c).peak;
  const int64_t budget = least + *rc::gen::inRange<int64_t>(0, std::max<int64_t>(full - least, 0) + 2);
  OptimalOptions coarse;
  coarse.refine = *rc::gen::arbitrary<bool>();
  coarse.levels = *rc::gen::inRange(1, 40);
  const OptimalPlan o = optimalPlan(c, budget, coarse);
  RC_CLASSIFY(o.exactGrid, "exact grid");
  RC_CLASSIFY(o.minPeakFallback, "least-peak fallback");
  const Judged j = judge(o.schedule, c);
  RC_ASSERT(j.peak <= budget);
  RC_ASSERT(j.peak == o.peakBytes);
  RC_ASSERT(j.recompute == o.recomputeFlops);
  // The exact grid is never beaten by the coarse one.
  RC_ASSERT(j.recompute >= optimalPlan(c, budget).recomputeFlops);
}

RC_GTEST_PROP(Optimal, withOpLevelMasksItStillFits, ()) {
  const CaseSpec spec = *genSpec(8);
  const ChainCost c = costOf(spec);
  OptimalOptions o;
  o.keep = selectiveMasks(c, {});
  const int64_t least = optimalMinBudget(c, o.keep);
  const int64_t budget = least + *rc::gen::inRange<int64_t>(0, least);
  const OptimalPlan plan = optimalPlan(c, budget, o);
  const Judged j = judge(plan.schedule, c);
  RC_ASSERT(j.peak <= budget);
  RC_ASSERT(j.peak == plan.peakBytes);
}

TEST(Optimal, theSmallestFeasibleBudgetIsExactAndNamed) {
  for (const ChainCost& c : {homogeneous(blockKind("mlp"), 16), mixed(11)}) {
    const int64_t least = optimalMinBudget(c);
    EXPECT_EQ(judge(optimalSchedule(c, least), c).peak, least);
    try {
      optimalSchedule(c, least - 1);
      ADD_FAILURE() << "budget " << least - 1 << " accepted";
    } catch (const InputError& e) {
      EXPECT_EQ(std::string(e.what()), "policy 'optimal:budget=" + std::to_string(least - 1) +
                                           "': infeasible; the smallest feasible budget is " + std::to_string(least) +
                                           " bytes");
    }
    // No rival reaches below it.
    for (const auto& [name, s] : rivals(c)) EXPECT_GE(judge(s, c).peak, least) << name;
  }
}

TEST(Optimal, aHomogeneousChainOfAThousandBlocksIsQuick) {
  const ChainCost c = homogeneous(blockKind("mlp"), 1000);
  const int64_t full = judge(storeAllSchedule(c), c).peak;
  const int64_t budget = judge(uniformSchedule(c, 32), c).peak;
  const OptimalPlan o = optimalPlan(c, budget);
  const Judged j = judge(o.schedule, c);
  EXPECT_LE(j.peak, budget);
  EXPECT_LE(j.recompute, judge(uniformSchedule(c, 32), c).recompute);
  EXPECT_LT(budget, full);
}

// Not a timed test: prints the DP's time at L = 200 distinct blocks and 500 levels for the record. Run it with
//   policies_math_test --gtest_also_run_disabled_tests --gtest_filter='*TwoHundred*'
TEST(Optimal, DISABLED_reportsItsTimeOnTwoHundredHeterogeneousBlocks) {
  std::vector<BlockSpec> bs;
  for (int i = 0; i < 200; ++i) {
    BlockSpec b = block(i % 3 == 0   ? blockKind("transformer")
                        : i % 3 == 1 ? blockKind("residual-bn")
                                     : blockKind("mlp"),
                        1 + i % 2);
    b.activation = static_cast<Activation>(i % 3);
    bs.push_back(b);
  }
  CaseSpec spec = specOf(bs, 2, 8, 8);
  spec.dropout = 0.1;
  const ChainCost c = costOf(spec);
  const int64_t full = judge(storeAllSchedule(c), c).peak;
  const int64_t least = optimalMinBudget(c);
  OptimalOptions o;
  o.refine = false;
  // Levels are whole multiples of the model's gcd; a budget of 500 such units tabulates exactly 500 levels.
  const int64_t unit = optimalPlan(c, (full + least) / 2, o).unitBytes;
  const int64_t budget = std::clamp<int64_t>((full + least) / 2 / (500 * unit), 1, INT64_MAX) * 500 * unit;
  const auto t0 = std::chrono::steady_clock::now();
  const OptimalPlan plan = optimalPlan(c, budget, o);
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  const Judged j = judge(plan.schedule, c);
  EXPECT_LE(j.peak, budget);
  EXPECT_EQ(plan.levels, 500);
  std::printf(
      "optimal DP: L=200 heterogeneous, budget %lld (least %lld, store-all %lld), %lld levels of %lld bytes: "
      "%.2f s; recompute %lld FLOPs\n",
      static_cast<long long>(budget), static_cast<long long>(least), static_cast<long long>(full),
      static_cast<long long>(plan.levels), static_cast<long long>(plan.unitBytes), seconds,
      static_cast<long long>(j.recompute));
}

}  // namespace
}  // namespace ckpt
