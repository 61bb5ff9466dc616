// bench/time_model.h: the call classes counted on a schedule, the prediction's arithmetic (what it takes from
// which calibration schedule, the executor's time outside the ops), and that a calibration times every op in the
// classes its schedule runs. No timing is asserted: the times are synthetic or only checked to exist.
#include "bench/time_model.h"

#include <gtest/gtest.h>

#include <cmath>

#include "cases/case_json.h"
#include "harness/engine/chain_cost.h"
#include "harness/engine/policy.h"
#include "test_util.h"

namespace ckpt::bench {
namespace {

CaseSpec catalogue(const std::string& name) { return loadCase(test::catalogueCase(name).string()); }

int64_t total(const CallCounts& counts, CallClass c) {
  int64_t n = 0;
  for (const auto& [key, k] : counts) n += k[c];
  return n;
}

// Store-all runs every op once per micro-batch, saving, and reads every context it saved: nothing else.
TEST(TimeModelCounts, StoreAllSavesEveryForwardAndReadsItStale) {
  for (const char* name : {"tiny", "resnet-accum"}) {
    const CaseSpec spec = catalogue(name);
    const ChainCost cost = caseChainCost(spec);
    const CallCounts counts = policyCallCounts<double>(spec, storeAllSchedule(cost));
    ASSERT_FALSE(counts.empty()) << name;
    for (const auto& [key, k] : counts) {
      EXPECT_EQ(k[kForwardSaved], spec.microBatches) << name << " block " << key.first << " node " << key.second;
      EXPECT_EQ(k[kBackwardStale], spec.microBatches) << name << " block " << key.first << " node " << key.second;
      EXPECT_EQ(k[kForwardUnsaved] + k[kRecomputeSaved] + k[kRecomputeUnsaved] + k[kBackwardFresh], 0) << name;
    }
    EXPECT_EQ(recomputeCalls(counts), 0) << name;
  }
}

// Full recomputation: every block but the stored last one keeps nothing in its first forward, is recomputed once
// saving its contexts, and its backward reads those fresh contexts.
TEST(TimeModelCounts, FullRecomputeRecomputesEveryBlockButTheLastOnce) {
  const CaseSpec spec = catalogue("mlp-deep");
  const ChainCost cost = caseChainCost(spec);
  const CallCounts counts = policyCallCounts<double>(spec, fullRecomputeSchedule(cost));
  const int last = cost.layers() - 1;
  int64_t recomputedOps = 0;
  for (const auto& [key, k] : counts) {
    if (key.first == last) {
      EXPECT_EQ(k[kForwardSaved], 1);
      EXPECT_EQ(k[kBackwardStale], 1);
      continue;
    }
    ++recomputedOps;
    EXPECT_EQ(k[kForwardUnsaved], 1) << "block " << key.first << " node " << key.second;
    EXPECT_EQ(k[kRecomputeSaved], 1) << "block " << key.first << " node " << key.second;
    EXPECT_EQ(k[kBackwardFresh], 1) << "block " << key.first << " node " << key.second;
    EXPECT_EQ(k[kForwardSaved] + k[kBackwardStale] + k[kRecomputeUnsaved], 0);
  }
  EXPECT_GT(recomputedOps, 0);
  EXPECT_EQ(recomputeCalls(counts), recomputedOps);
}

// Recursive and revolve advance through blocks without saving: calls of their own class.
TEST(TimeModelCounts, RecursiveAdvancesWithoutSaving) {
  const CaseSpec spec = catalogue("mlp-deep");
  const ChainCost cost = caseChainCost(spec);
  const CallCounts counts = policyCallCounts<double>(spec, makeSchedule(parsePolicy("recursive"), cost));
  EXPECT_GT(total(counts, kRecomputeUnsaved), 0);
  EXPECT_GT(total(counts, kRecomputeSaved), 0);
}

// Two ops, synthetic times: a store-all and a full-recompute calibration, with one class missing.
CallTimes syntheticTimes() {
  const double nan = std::nan("");
  CallTimes t;
  //                               fwd saved, fwd unsaved, recompute saved, recompute unsaved, bwd stale, bwd fresh
  t.storeAll.perCall[{0, 0}] = {1.0, nan, nan, nan, 2.0, nan};
  t.storeAll.perCall[{1, 0}] = {3.0, nan, nan, nan, 4.0, nan};
  t.storeAll.outside = 0.5;
  t.full.perCall[{0, 0}] = {nan, 0.75, 1.25, nan, 1.5, 1.0};
  t.full.perCall[{1, 0}] = {3.0, nan, nan, nan, 4.0, nan};  // the last block, stored
  t.full.outside = 0.9;
  t.full.recomputes = 1;
  return t;
}

CallCounts counts(std::initializer_list<std::pair<NodeKey, std::array<int64_t, kCallClasses>>> rows) {
  CallCounts c;
  for (const auto& [key, k] : rows) c[key] = k;
  return c;
}

TEST(TimeModelPrediction, StoreAllIsPredictedAtZeroAndSumsItsCalls) {
  const CallTimes t = syntheticTimes();
  const CallCounts storeAll = counts({{{0, 0}, {1, 0, 0, 0, 1, 0}}, {{1, 0}, {1, 0, 0, 0, 1, 0}}});
  EXPECT_DOUBLE_EQ(predictStepSeconds(t, storeAll), 0.5 + 1 + 2 + 3 + 4);
  EXPECT_DOUBLE_EQ(predictTimeOverhead(t, storeAll, storeAll), 0.0);
}

TEST(TimeModelPrediction, RecomputeClassesComeFromFullRecomputeAndTheOutsideScalesWithRecomputes) {
  const CallTimes t = syntheticTimes();
  const CallCounts storeAll = counts({{{0, 0}, {1, 0, 0, 0, 1, 0}}, {{1, 0}, {1, 0, 0, 0, 1, 0}}});
  // Block 0 recomputed twice (once saving, once advancing), read fresh; block 1 stored.
  const CallCounts policy = counts({{{0, 0}, {0, 1, 1, 1, 0, 1}}, {{1, 0}, {1, 0, 0, 0, 1, 0}}});
  // outside: 0.5 + (0.9 - 0.5) * 2 recomputes / 1; unsaved forward 0.75; recompute saved 1.25; recompute
  // unsaved = full's unsaved forward 0.75; fresh backward 1.0; block 1: 3 + 4.
  const double expected = 0.5 + 0.4 * 2 + 0.75 + 1.25 + 0.75 + 1.0 + 3 + 4;
  EXPECT_DOUBLE_EQ(predictStepSeconds(t, policy), expected);
  EXPECT_DOUBLE_EQ(predictTimeOverhead(t, storeAll, policy), expected / 10.5 - 1.0);
}

TEST(TimeModelPrediction, AClassNoCalibrationRanFallsBackToStoreAllsCall) {
  const CallTimes t = syntheticTimes();
  // Block 1 recomputed (full recomputation stored it): its forward and backward as store-all ran them.
  EXPECT_DOUBLE_EQ(callSeconds(t, {1, 0}, kRecomputeSaved), 3.0);
  EXPECT_DOUBLE_EQ(callSeconds(t, {1, 0}, kRecomputeUnsaved), 3.0);
  EXPECT_DOUBLE_EQ(callSeconds(t, {1, 0}, kForwardUnsaved), 3.0);
  EXPECT_DOUBLE_EQ(callSeconds(t, {1, 0}, kBackwardFresh), 4.0);
  EXPECT_DOUBLE_EQ(callSeconds(t, {0, 0}, kBackwardStale), 2.0);  // store-all's, not full's
  EXPECT_DOUBLE_EQ(callSeconds(t, {7, 7}, kForwardSaved), 0.0);   // an op neither ran
}

// A real calibration (half a second of instrumented steps of the tiny case): every op timed in each class its
// schedule runs, the outside and step times present, full recomputation's recompute calls its schedule's.
TEST(TimeModelCalibration, TimesEveryOpInTheClassesItsScheduleRuns) {
  const CaseSpec spec = catalogue("tiny");
  const ChainCost cost = caseChainCost(spec);
  const CallTimes t = calibrateTimeModel<double>(spec, 2);
  const CallCounts sa = policyCallCounts<double>(spec, storeAllSchedule(cost));
  const CallCounts full = policyCallCounts<double>(spec, fullRecomputeSchedule(cost));
  EXPECT_EQ(t.full.recomputes, recomputeCalls(full));
  EXPECT_GT(t.storeAll.step, 0.0);
  EXPECT_GT(t.full.step, 0.0);
  for (const auto& [schedule, times] : {std::pair{&sa, &t.storeAll}, std::pair{&full, &t.full}})
    for (const auto& [key, k] : *schedule)
      for (int c = 0; c < kCallClasses; ++c) {
        ASSERT_TRUE(times->perCall.count(key));
        const double s = times->perCall.at(key)[static_cast<size_t>(c)];
        if (k[static_cast<size_t>(c)] > 0)
          EXPECT_TRUE(std::isfinite(s) && s >= 0) << "block " << key.first << " node " << key.second << " class " << c;
        else EXPECT_TRUE(std::isnan(s)) << "block " << key.first << " node " << key.second << " class " << c;
      }
  EXPECT_TRUE(std::isfinite(predictTimeOverhead(t, sa, full)));
}

}  // namespace
}  // namespace ckpt::bench
