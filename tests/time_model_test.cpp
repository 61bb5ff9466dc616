// bench_engine's time model (bench/time_model.h, bench/time_model_fit.h): the calibration schedules (block
// recomputes, and op-level rebuilds apart) are valid, recompute what each is for, and (full recomputation apart)
// are no schedule a catalogue policy runs; the least squares gives back the weights that made its data, and
// declines to fit what the data cannot tell apart.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <string>
#include <vector>

#include "bench/time_model_fit.h"
#include "cases/case_json.h"
#include "harness/engine/policy.h"
#include "tests/test_util.h"

namespace ckpt::bench {
namespace {

std::vector<Schedule> catalogueSchedules(const ChainCost& cost) {
  std::vector<Schedule> out;
  for (const std::string& p : defaultPolicies(cost)) out.push_back(makeSchedule(parsePolicy(p), cost));
  out.push_back(fullRecomputeSchedule(cost));
  return out;
}

int64_t total(const std::map<NodeKey, int64_t>& m) {
  int64_t n = 0;
  for (const auto& [key, count] : m) n += count;
  return n;
}

// On every catalogue case: full recomputation first, then schedules that validate and that no policy runs.
TEST(TimeModelCalibration, fullRecomputationThenSchedulesNoPolicyRuns) {
  for (const auto& entry : std::filesystem::directory_iterator(test::catalogueDir())) {
    const CaseSpec spec = loadCase(entry.path().string());
    const ChainCost cost = caseChainCost(spec);
    const std::vector<Schedule> evaluated = catalogueSchedules(cost);
    const std::vector<Schedule> cal = calibrationSchedules(cost, evaluated);
    ASSERT_FALSE(cal.empty()) << spec.name;
    EXPECT_EQ(cal.front().instrs, fullRecomputeSchedule(cost).instrs) << spec.name;
    EXPECT_LE(cal.size(), kCalibrationSchedules) << spec.name;
    EXPECT_GE(cal.size(), 2u) << spec.name << ": nothing to fit the advancing weight on";
    EXPECT_NO_THROW(validateSchedule(twosSchedule(cost.layers()), cost)) << spec.name;
    EXPECT_NO_THROW(validateSchedule(pairsSchedule(cost.layers()), cost)) << spec.name;
    // Two revolves where the chain has room for them: one slot more than the catalogue's, then fewer slots (longer
    // advancing runs), for a_advance.
    std::vector<int> revolveSlots;
    const std::string revolve = "revolve:slots=";
    for (const Schedule& c : cal)
      if (c.policy.rfind(revolve, 0) == 0) revolveSlots.push_back(std::stoi(c.policy.substr(revolve.size())));
    if (cost.layers() >= 8) {
      ASSERT_EQ(revolveSlots.size(), 2u) << spec.name;
      EXPECT_LT(revolveSlots[1], revolveSlots[0]) << spec.name;
    }
    for (size_t i = 0; i < cal.size(); ++i) {
      EXPECT_NO_THROW(validateSchedule(cal[i], cost)) << spec.name << " " << cal[i].policy;
      if (i == 0) continue;
      for (const Schedule& e : evaluated)
        EXPECT_FALSE(e.instrs == cal[i].instrs && e.keep == cal[i].keep)
            << spec.name << ": calibration " << cal[i].policy << " is the schedule of " << e.policy;
    }
  }
}

// pairs recomputes every block with its tape and advances the first of each pair once more; twos recomputes
// every block once with its tape and advances nothing. Counted on a real chain by the executor's meter.
TEST(TimeModelCalibration, pairsAdvancesTheFirstBlockOfEachPairTwosNothing) {
  const CaseSpec spec = loadCase(test::catalogueCase("mlp-deep").string());
  const ChainCost cost = caseChainCost(spec);
  const int n = cost.layers();
  ASSERT_GE(n, 4);
  std::vector<int64_t> nodes;  // ops per block
  for (const auto& block : buildChain<float>(spec).blocks) nodes.push_back(static_cast<int64_t>(block.nodes.size()));
  auto ops = [&](auto pick) {
    int64_t k = 0;
    for (int b = 0; b < n; ++b) k += pick(b) ? nodes[static_cast<size_t>(b)] : 0;
    return k;
  };
  const NodeClock pairs = policyForwardCounts<float>(spec, pairsSchedule(n));
  const NodeClock twos = policyForwardCounts<float>(spec, twosSchedule(n));
  // pairs: the last block runs once, taped, in the backward; every other block is recomputed with its tape; the
  // first of each pair but the last pair is advanced once more first (the last pair's advance is its first run).
  const int lastPair = (n - 1) / 2 * 2;
  EXPECT_EQ(total(pairs.recomputes), ops([&](int b) { return b != n - 1; }));
  EXPECT_EQ(total(pairs.recomputesUntaped), ops([&](int b) { return b % 2 == 0 && b < lastPair; }));
  EXPECT_EQ(total(twos.recomputes), ops([](int) { return true; }));
  EXPECT_EQ(total(twos.recomputesUntaped), 0);
}

// What a schedule recomputes with every op's share of the step set to 1: the terms count calls.
RecomputeShares callCounts(const CaseSpec& spec, const Schedule& s) {
  const NodeClock counts = policyForwardCounts<float>(spec, s);
  ForwardShares ones;
  for (const auto& [key, n] : counts.recomputes) ones.steady[key] = 1.0;
  for (const auto& [key, n] : counts.recomputesUntaped) ones.untaped[key] = 1.0;
  return recomputeShares(ones, counts, s);
}

// The rebuild calibration: twos and pairs with selective's masks on every block, as the catalogue's rebuilding
// policies have them (store-all with the masks on half the blocks where both are a policy's schedule), each
// dropped context rebuilt once per micro-batch, and none a schedule a policy runs. The catalogue's selective
// rebuilds and recomputes no block, full recomputation the other way round, uniform+selective both.
TEST(TimeModelCalibration, rebuildSchedulesMaskEveryBlockAsTheCataloguesPoliciesDo) {
  int cases = 0, composed = 0;
  for (const auto& entry : std::filesystem::directory_iterator(test::catalogueDir())) {
    const CaseSpec spec = loadCase(entry.path().string());
    const ChainCost cost = caseChainCost(spec);
    const std::vector<Schedule> evaluated = catalogueSchedules(cost);
    const Schedule selectiveAlone = makeSchedule(parsePolicy("selective"), cost);
    const std::vector<Schedule> rebuild = rebuildSchedules(cost, evaluated);
    EXPECT_FALSE(rebuild.empty()) << spec.name;
    for (const Schedule& s : rebuild) {
      EXPECT_NO_THROW(validateSchedule(s, cost)) << spec.name << " " << s.policy;
      for (const Schedule& e : evaluated)
        EXPECT_FALSE(e.instrs == s.instrs && e.keep == s.keep) << spec.name << ": " << s.policy << " is " << e.policy;
      const bool everyBlock = s.keep == selectiveAlone.keep;
      composed += everyBlock ? 1 : 0;
      if (!everyBlock) {
        EXPECT_EQ(s.instrs, selectiveAlone.instrs) << spec.name << " " << s.policy;
      }
      int64_t dropped = 0;
      for (int b = 0; b < cost.layers(); ++b)
        for (size_t k = 0; k < s.keepFor(b).size(); ++k) dropped += s.keepFor(b)[k] ? 0 : 1;
      EXPECT_GT(dropped, 0) << spec.name << " " << s.policy;
      const RecomputeShares r = callCounts(spec, s);
      EXPECT_EQ(r.rebuilt, static_cast<double>(dropped * spec.microBatches)) << spec.name << " " << s.policy;
      EXPECT_EQ(r.taped > 0, everyBlock) << spec.name << " " << s.policy;  // twos and pairs recompute blocks
    }
    const RecomputeShares alone = callCounts(spec, selectiveAlone);
    EXPECT_EQ(alone.taped + alone.advancing, 0.0) << spec.name;
    EXPECT_GT(alone.rebuilt, 0.0) << spec.name;
    const RecomputeShares full = callCounts(spec, fullRecomputeSchedule(cost));
    EXPECT_GT(full.taped, 0.0) << spec.name;
    EXPECT_EQ(full.rebuilt, 0.0) << spec.name;
    const RecomputeShares both = callCounts(spec, makeSchedule(parsePolicy("uniform+selective"), cost));
    EXPECT_GT(both.taped, 0.0) << spec.name;
    EXPECT_GT(both.rebuilt, 0.0) << spec.name;
    ++cases;
  }
  EXPECT_GE(cases, 5);
  EXPECT_GE(composed, cases);  // on average at least one masked block schedule per case (short chains: halves)
}

TEST(TimeModelFit, leastSquaresGivesBackTheWeightsThatMadeTheData) {
  const std::vector<RecomputeShares> x{{0.30, 0.0}, {0.33, 0.10}, {0.33, 0.40}, {0.20, 0.05}};
  std::vector<double> y;
  for (const RecomputeShares& r : x) y.push_back(0.6 * r.taped + 0.9 * r.advancing);
  const TimeModelFit fit = fitWeights(x, y);
  ASSERT_TRUE(fit.fitted);
  EXPECT_NEAR(fit.tape, 0.6, 1e-12);
  EXPECT_NEAR(fit.advance, 0.9, 1e-12);
  EXPECT_NEAR(fit.residual, 0.0, 1e-12);
  EXPECT_NEAR(predictTimeOverhead(fit, {0.5, 0.25}), 0.6 * 0.5 + 0.9 * 0.25, 1e-12);
  // A schedule off the model shows in the residual, the fit still the best over all four.
  y[2] += 0.05;
  const TimeModelFit off = fitWeights(x, y);
  EXPECT_GT(off.residual, 1e-3);
  EXPECT_LT(off.residual, 0.05);
}

// a_rebuild is fitted on what the block weights leave of the rebuild calibration's overheads; until then, and
// where nothing is rebuilt, it is a_tape's (a rebuild is a taped recompute).
TEST(TimeModelFit, rebuildWeightFromWhatTheBlockWeightsLeave) {
  const std::vector<RecomputeShares> x{{0.30, 0.0}, {0.33, 0.10}, {0.33, 0.40}};
  const std::vector<RecomputeShares> xr{{0.0, 0.0, 0.12}, {0.0, 0.0, 0.10}, {0.05, 0.02, 0.08}};
  auto model = [](const RecomputeShares& r) { return 0.6 * r.taped + 0.9 * r.advancing + 0.8 * r.rebuilt; };
  std::vector<double> y, yr;
  for (const RecomputeShares& r : x) y.push_back(model(r));
  for (const RecomputeShares& r : xr) yr.push_back(model(r));
  TimeModelFit fit = fitWeights(x, y);
  EXPECT_NEAR(fit.rebuild, 0.6, 1e-12);
  fitRebuildWeight(fit, xr, yr);
  EXPECT_NEAR(fit.rebuild, 0.8, 1e-12);
  EXPECT_NEAR(fit.tape, 0.6, 1e-12);
  EXPECT_NEAR(fit.residual, 0.0, 1e-12);
  EXPECT_NEAR(predictTimeOverhead(fit, {0.1, 0.2, 0.3}), 0.06 + 0.18 + 0.24, 1e-12);
  // One rebuild schedule off by 0.03: the weight moves, the residual shows it.
  yr[0] += 0.03;
  TimeModelFit off = fitWeights(x, y);
  fitRebuildWeight(off, xr, yr);
  EXPECT_GT(off.rebuild, 0.8);
  EXPECT_GT(off.residual, 1e-3);
  // Nothing rebuilt, or block weights unfitted: a_rebuild stays a_tape's (1, unfitted).
  TimeModelFit none = fitWeights(x, y);
  fitRebuildWeight(none, {{0.1, 0.0, 0.0}}, {0.05});
  EXPECT_EQ(none.rebuild, none.tape);
  TimeModelFit unfitted;
  fitRebuildWeight(unfitted, xr, yr);
  EXPECT_EQ(unfitted.rebuild, 1.0);
}

TEST(TimeModelFit, declinesWhatTheDataCannotTellApart) {
  // One schedule, or none that advances: the weights stay 1 (the per-op repeats' own times), unfitted.
  for (const auto& x :
       {std::vector<RecomputeShares>{{0.3, 0.1}}, std::vector<RecomputeShares>{{0.3, 0.0}, {0.2, 0.0}}}) {
    const TimeModelFit fit = fitWeights(x, std::vector<double>(x.size(), 0.2));
    EXPECT_FALSE(fit.fitted);
    EXPECT_EQ(fit.tape, 1.0);
    EXPECT_EQ(fit.advance, 1.0);
  }
  EXPECT_FALSE(fitWeights({{0.3, 0.1}, {0.2, 0.05}}, {0.2}).fitted);  // a measurement missing
}

// The calibration times its schedules again only while they disagree: a pass whose fit leaves a residual over
// kCalibrationResidualGoal is followed by another, and the fit is made on each schedule's median over the passes.
TEST(TimeModelFit, timesTheCalibrationAgainOnlyWhileItDisagrees) {
  const std::vector<RecomputeShares> x{{0.30, 0.0}, {0.33, 0.10}, {0.33, 0.40}, {0.20, 0.05}};
  const std::vector<RecomputeShares> xr{{0.0, 0.0, 0.12}, {0.05, 0.02, 0.08}};
  auto model = [](const RecomputeShares& r) { return 0.6 * r.taped + 0.9 * r.advancing + 0.8 * r.rebuilt; };
  int blockCalls = 0, rebuildCalls = 0;
  auto rebuild = [&](size_t i) { return ++rebuildCalls, model(xr[i]); };
  // Agreeing schedules: one pass.
  TimeModelFit fit = fitOverPasses(x, xr, [&](size_t i) { return ++blockCalls, model(x[i]); }, rebuild);
  EXPECT_EQ(fit.passes, 1);
  EXPECT_EQ(blockCalls, 4);
  EXPECT_EQ(rebuildCalls, 2);
  EXPECT_NEAR(fit.advance, 0.9, 1e-12);
  // One schedule 0.06 off in the first pass only (residual 0.051): the mean of two passes still leaves 0.026, so a
  // third, whose median drops it.
  blockCalls = rebuildCalls = 0;
  int pass = 0;
  fit = fitOverPasses(
      x, xr,
      [&](size_t i) {
        pass += i == 0 ? 1 : 0;
        ++blockCalls;
        return model(x[i]) + (pass == 1 && i == 3 ? 0.06 : 0.0);
      },
      rebuild);
  EXPECT_EQ(fit.passes, 3);
  EXPECT_EQ(blockCalls, 12);
  EXPECT_EQ(rebuildCalls, 6);
  EXPECT_NEAR(fit.tape, 0.6, 1e-12);
  EXPECT_NEAR(fit.advance, 0.9, 1e-12);
  EXPECT_NEAR(fit.rebuild, 0.8, 1e-12);
  EXPECT_NEAR(fit.residual, 0.0, 1e-12);
  // A schedule off in every pass: it stops after kCalibrationPasses, the residual showing it.
  blockCalls = 0;
  fit = fitOverPasses(x, xr, [&](size_t i) { return ++blockCalls, model(x[i]) + (i == 3 ? 0.06 : 0.0); }, rebuild);
  EXPECT_EQ(fit.passes, kCalibrationPasses);
  EXPECT_EQ(blockCalls, 4 * kCalibrationPasses);
  EXPECT_GT(fit.residual, kCalibrationResidualGoal);
  // Unfitted (one schedule): one pass, nothing rebuilt is timed.
  rebuildCalls = 0;
  fit = fitOverPasses({{0.3, 0.1}}, xr, [&](size_t) { return 0.2; }, rebuild);
  EXPECT_FALSE(fit.fitted);
  EXPECT_EQ(fit.passes, 1);
  EXPECT_EQ(rebuildCalls, 0);
}

// On a real case, timed for a few milliseconds a schedule: the number of passes is the machine's, the rule not.
TEST(TimeModelFit, aTimedCalibrationStopsByTheRule) {
  const CaseSpec spec = loadCase(test::catalogueCase("tiny").string());
  const ChainCost cost = caseChainCost(spec);
  const TimeModelFit fit =
      fitTimeModel<float>(spec, storeAllForwardShares<float>(spec, 1), catalogueSchedules(cost), 0.005, 1);
  ASSERT_TRUE(fit.fitted);
  EXPECT_GE(fit.passes, 1);
  EXPECT_LE(fit.passes, kCalibrationPasses);
  if (fit.passes < kCalibrationPasses) {
    EXPECT_LE(fit.residual, kCalibrationResidualGoal) << "stopped after " << fit.passes;
  }
  EXPECT_TRUE(std::isfinite(fit.tape) && std::isfinite(fit.advance) && std::isfinite(fit.rebuild));
}

}  // namespace
}  // namespace ckpt::bench
