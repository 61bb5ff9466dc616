// Planning a profiled model (harness/engine/COSTS.md): the chain-costs reader refuses bad files field by field;
// the planner's chain from a costs file; which schedules a per-module placement expresses and the schedule of a
// placement (a round trip, as a property); segments:budget= fits its budget and recomputes no more than any
// uniform split that fits; the saved-bytes prediction against a count made by hand from the fixture; the plan
// check of `validate --plan`; and the CLI: plan --costs, --budget, --placement and their bad input.
#include <gtest/gtest.h>
#include <rapidcheck/gtest.h>

#include <fstream>

#include "common/input_error.h"
#include "harness/user_model/plan_check.h"
#include "harness/engine/costs_file.h"
#include "harness/engine/costs_plans.h"
#include "harness/engine/placement.h"
#include "harness/engine/plan.h"
#include "harness/engine/policy.h"
#include "tests/cli_process.h"

namespace ckpt {
namespace {

using nlohmann::json;

std::filesystem::path tinyPath() { return test::sourceDir() / "tests" / "data" / "costs" / "tiny.json"; }
json tinyJson() { return json::parse(test::readFile(tinyPath())); }
ChainCosts tiny() { return loadChainCosts(tinyPath().string()); }

std::string parseError(const json& j) {
  try {
    parseChainCosts(j, "costs.json");
  } catch (const InputError& e) {
    return e.what();
  }
  return "";
}

TEST(CostsFile, readsTheFixture) {
  const ChainCosts c = tiny();
  ASSERT_EQ(c.layers(), 5);
  EXPECT_EQ(c.blocks[3].name, "h.3");
  EXPECT_EQ(c.blocks[2].savesInput, false);
  EXPECT_EQ(c.boundaryBytes.size(), 6u);
  EXPECT_EQ(c.shared[1].savedBy, (std::vector<int>{1, 3}));
  EXPECT_TRUE(c.after.savesBoundary);
}

TEST(CostsFile, refusesEachBadFieldInOneLine) {
  const std::vector<std::pair<std::function<void(json&)>, std::string>> cases = {
      {[](json& j) { j["format"] = "ckptcheck-case"; }, "costs.json: format: must be \"ckptcheck-chain-costs\""},
      {[](json& j) { j["version"] = 2; }, "costs.json: version: this ckptcheck reads version 1, the file has 2"},
      {[](json& j) { j.erase("step_seconds"); }, "costs.json: step_seconds: missing"},
      {[](json& j) { j["blocks"][3]["forward_flops"] = -1; },
       "costs.json: blocks[3].forward_flops: must be a non-negative integer"},
      {[](json& j) { j["blocks"][1]["ops"][0]["saved_bytes"] = "64"; },
       "costs.json: blocks[1].ops[0].saved_bytes: must be a non-negative integer"},
      {[](json& j) { j["blocks"][0]["forward_flops"] = 1; },
       "costs.json: blocks[0].forward_flops: the block's FLOPs (1 forward"},
      {[](json& j) { j["boundary_bytes"].erase(0); }, "costs.json: boundary_bytes: must hold 6 sizes"},
      {[](json& j) { j["shared"][0]["saved_by"][0] = 5; },
       "costs.json: shared[0].saved_by[0]: must be a block index in [0, 4]"},
      {[](json& j) { j["blocks"] = json::array(); }, "costs.json: blocks: must hold at least one block"},
      {[](json& j) { j["outside"].erase("after"); }, "costs.json: outside.after: missing"},
      {[](json& j) { j["blocks"][2]["backward_seconds"] = -0.5; },
       "costs.json: blocks[2].backward_seconds: must be a non-negative number"},
      {[](json& j) { j["blocks"][4]["saves_output"] = 1; },
       "costs.json: blocks[4].saves_output: must be true or false"},
      {[](json& j) { j["checkpoint_seconds"] = "fast"; },
       "costs.json: checkpoint_seconds: must be a number of seconds, at most 10^9 either way"},
      {[](json& j) { j["checkpoint_seconds"] = -2e9; },
       "costs.json: checkpoint_seconds: must be a number of seconds, at most 10^9 either way"},
      {[](json& j) { j["blocks"][2]["recompute_seconds"] = 2e9; },
       "costs.json: blocks[2].recompute_seconds: must be a number of seconds, at most 10^9 either way"},
      {[](json& j) { j["blocks"][0]["recompute_seconds"] = 0.1; },
       "costs.json: blocks[1].recompute_seconds: missing, blocks[0] has one (every block has one or none does)"},
      {[](json& j) { j["blocks"][3]["recompute_seconds"] = 0.1; },
       "costs.json: blocks[3].recompute_seconds: present, blocks[0] has none (every block has one or none does)"},
      {[](json& j) { j["blocks"][1]["recompute_end_seconds"] = 0.1; },
       "costs.json: blocks[1].recompute_end_seconds: present without recompute_seconds"},
      {[](json& j) {
         for (json& b : j["blocks"]) b["recompute_seconds"] = 0.1;
         j["blocks"][0]["recompute_end_seconds"] = 0.2;
       },
       "costs.json: blocks[1].recompute_end_seconds: missing, blocks[0] has one (every block has one or none does)"},
      {[](json& j) {
         for (json& b : j["blocks"]) b["recompute_seconds"] = b["recompute_end_seconds"] = 0.1;
         j["blocks"][4]["recompute_end_seconds"] = "slow";
       },
       "costs.json: blocks[4].recompute_end_seconds: must be a number of seconds, at most 10^9 either way"},
  };
  for (const auto& [change, want] : cases) {
    json j = tinyJson();
    change(j);
    const std::string got = parseError(j);
    EXPECT_EQ(got.rfind(want, 0), 0u) << "got: " << got << "\nwant: " << want;
    EXPECT_EQ(got.find('\n'), std::string::npos);
  }
}

// The predicted time overhead: each extra forward run of a block costs its forward seconds plus
// checkpoint_seconds (absent in a file: 0), over the plain step; nothing recomputed, nothing predicted.
TEST(CostsPlan, predictedTimeCountsEachRecomputedBlocksForwardAndCheckpointSeconds) {
  json j = tinyJson();
  j["step_seconds"] = 1.0;
  for (size_t i = 0; i < j["blocks"].size(); ++i) j["blocks"][i]["forward_seconds"] = 0.01 * static_cast<double>(i + 1);
  const ChainCosts plain = parseChainCosts(j, "costs.json");
  EXPECT_EQ(plain.checkpointSeconds, 0.0);
  j["checkpoint_seconds"] = 0.005;
  const ChainCosts withCheckpoint = parseChainCosts(j, "costs.json");
  const ChainCost cost = chainCostOf(plain);
  const Schedule u3 = uniformSchedule(cost, 3);  // blocks 0 and 1-2 recomputed, 3-4 stored
  EXPECT_DOUBLE_EQ(*predictedTimeOverhead(plain, u3), 0.01 + 0.02 + 0.03);
  EXPECT_DOUBLE_EQ(*predictedTimeOverhead(withCheckpoint, u3), 0.01 + 0.02 + 0.03 + 3 * 0.005);
  EXPECT_DOUBLE_EQ(*predictedTimeOverhead(withCheckpoint, storeAllSchedule(cost)), 0.0);
  // Negative (full recomputation measured below the blocks' forwards): subtracted, but no block's recompute
  // counts below zero (block 0's 0.01 - 0.015).
  j["checkpoint_seconds"] = -0.015;
  const ChainCosts faster = parseChainCosts(j, "costs.json");
  EXPECT_DOUBLE_EQ(*predictedTimeOverhead(faster, u3), 0.0 + (0.02 - 0.015) + (0.03 - 0.015));
}

// recompute_seconds, measured per block, replaces forward seconds plus checkpoint_seconds for every block (the
// file's checkpoint_seconds is then not read into any prediction); a negative one counts as 0.
TEST(CostsPlan, predictedTimeCountsEachRecomputedBlocksOwnRecomputeSeconds) {
  json j = tinyJson();
  j["step_seconds"] = 2.0;
  j["checkpoint_seconds"] = 0.5;
  const std::vector<double> recompute = {0.04, -0.01, 0.08, 0.3, 0.6};
  for (size_t i = 0; i < j["blocks"].size(); ++i) {
    j["blocks"][i]["forward_seconds"] = 0.01;
    j["blocks"][i]["recompute_seconds"] = recompute[i];
  }
  const ChainCosts c = parseChainCosts(j, "costs.json");
  ASSERT_TRUE(c.blocks[1].recomputeSeconds.has_value());
  EXPECT_EQ(*c.blocks[1].recomputeSeconds, -0.01);
  const ChainCost cost = chainCostOf(c);
  EXPECT_DOUBLE_EQ(*predictedTimeOverhead(c, uniformSchedule(cost, 3)), (0.04 + 0.0 + 0.08) / 2.0);
  EXPECT_DOUBLE_EQ(*predictedTimeOverhead(c, storeAllSchedule(cost)), 0.0);
}

// recompute_end_seconds is a block's figure where the next block is stored (or the chain ends): a recomputed
// segment's last block, and any recomputed block of a tape whose next block is stored; recompute_seconds elsewhere.
TEST(CostsPlan, predictedTimeCountsTheEndFigureWhereTheNextBlockIsStored) {
  json j = tinyJson();
  j["step_seconds"] = 1.0;
  const std::vector<double> within = {0.01, 0.02, 0.03, 0.04, 0.05}, end = {0.1, 0.2, 0.3, 0.4, 0.5};
  for (size_t i = 0; i < j["blocks"].size(); ++i) {
    j["blocks"][i]["recompute_seconds"] = within[i];
    j["blocks"][i]["recompute_end_seconds"] = end[i];
  }
  const ChainCosts c = parseChainCosts(j, "costs.json");
  const ChainCost cost = chainCostOf(c);
  // uniform:k=3: blocks 0 and 1-2 recomputed (calls 2, 2, 2), 3-4 stored: 0 and 1 are followed by a recomputed
  // block, 2 by a stored one.
  EXPECT_DOUBLE_EQ(*predictedTimeOverhead(c, uniformSchedule(cost, 3)), 0.01 + 0.02 + 0.3);
  // Every block recomputed, 0-1 and 2-4 as segments: the last is followed by the part after the chain, which is
  // never recomputed.
  const Schedule every = placementSchedule({{0, 1, true}, {2, 4, true}}, 5, "hand");
  EXPECT_DOUBLE_EQ(*predictedTimeOverhead(c, every), 0.01 + 0.02 + 0.03 + 0.04 + 0.5);
  // Stored, recomputed, stored, recomputed, stored: each recomputed block ends its run.
  const Schedule alternate =
      placementSchedule({{0, 0, false}, {1, 1, true}, {2, 2, false}, {3, 3, true}, {4, 4, false}}, 5, "hand");
  EXPECT_DOUBLE_EQ(*predictedTimeOverhead(c, alternate), 0.2 + 0.4);
  EXPECT_DOUBLE_EQ(*predictedTimeOverhead(c, storeAllSchedule(cost)), 0.0);
}

// Store-all saves everything once: the sum of every byte count the fixture lists, each storage once.
TEST(CostsPlan, storeAllSavesEveryStorageOnce) {
  const ChainCosts c = tiny();
  int64_t want = c.before.savedBytes + c.after.savedBytes;
  for (const ProfiledBlock& b : c.blocks) want += b.savedBytes();
  for (const SharedStorage& s : c.shared) want += s.bytes;
  // Boundaries saved: x_i for every block saving its input, x_5 (block 4's output, and the part after's input).
  for (int i = 0; i < c.layers(); ++i)
    want += c.blocks[static_cast<size_t>(i)].savesInput ? c.boundaryBytes[static_cast<size_t>(i)] : 0;
  want += c.boundaryBytes[5];
  const SavedPrediction p = predictSaved(c, {{0, 4, false}});
  EXPECT_EQ(p.total, want);
  EXPECT_EQ(p.before, 512);
  EXPECT_EQ(p.after, 256);  // x_5 was block 4's first
}

// Two recomputed segments and a stored one, counted by hand from the fixture: a recomputed segment keeps its
// input and the shared argument (1024 B, first kept by segment 0); the storage blocks 1 and 3 share is saved by
// block 3, the only stored one of the two.
TEST(CostsPlan, savedBytesOfAPlacementCountedByHand) {
  const ChainCosts c = tiny();
  const SavedPrediction p = predictSaved(c, {{0, 1, true}, {2, 3, true}, {4, 4, false}});
  const int64_t b = 4096, ops = 64 + 2 * 4 * b;
  EXPECT_EQ(p.byBlock, (std::vector<int64_t>{b + 1024, 0, b, 0, b + ops + b}));
  EXPECT_EQ(p.total, 512 + (b + 1024) + b + (b + ops + b) + 256);
  const SavedPrediction q = predictSaved(c, {{0, 2, false}, {3, 4, true}});
  // Block 2 saves neither x_2 nor x_3, so x_3 is the checkpoint's (block 3's); the storage blocks 1 and 3 share
  // is block 1's.
  EXPECT_EQ(q.byBlock, (std::vector<int64_t>{b + ops + 1024, b + ops + 128, ops, b, 0}));
}

TEST(Placement, storeAllAndUniformAreExpressibleRecursiveAndSelectiveAreNot) {
  const ChainCost cost = chainCostOf(tiny());
  EXPECT_EQ(placementOf(storeAllSchedule(cost)), (std::vector<Segment>{{0, 4, false}}));
  EXPECT_EQ(placementOf(uniformSchedule(cost, 3)), (std::vector<Segment>{{0, 0, true}, {1, 2, true}, {3, 4, false}}));
  std::string why;
  EXPECT_FALSE(placementOrWhy(recursiveSchedule(cost), &why));
  EXPECT_NE(why.find("runs 1 before the loss, 2 taped after"), std::string::npos) << why;
  EXPECT_FALSE(placementOrWhy(makeSchedule(parsePolicy("selective"), cost), &why));
  EXPECT_NE(why.find("selective"), std::string::npos) << why;
  try {
    placementOf(revolveSchedule(cost, 1));
    ADD_FAILURE() << "revolve:slots=1 has no placement";
  } catch (const InputError& e) {
    EXPECT_EQ(
        std::string(e.what()).rfind("policy 'revolve:slots=1' cannot be applied as a per-module placement: block", 0),
        0u)
        << e.what();
  }
}

// Any segmentation: its schedule is valid, runs each block once (stored) or twice (recomputed), and reads back
// as the same segments.
RC_GTEST_PROP(Placement, scheduleOfSegmentsRoundTrips, ()) {
  const int n = *rc::gen::inRange(1, 40);
  const auto cuts = *rc::gen::container<std::vector<bool>>(static_cast<size_t>(n), rc::gen::arbitrary<bool>());
  const auto recompute = *rc::gen::container<std::vector<bool>>(static_cast<size_t>(n), rc::gen::arbitrary<bool>());
  std::vector<Segment> segs;
  for (int i = 0; i < n; ++i) {
    const bool r = recompute[static_cast<size_t>(i)];
    // A cut starts a segment; adjacent stored blocks are one segment however cut, as placementOf reads them.
    const bool joins = !segs.empty() && segs.back().recompute == r && (!cuts[static_cast<size_t>(i)] || !r);
    if (joins) segs.back().last = i;
    else segs.push_back({i, i, r});
  }
  ChainCosts c = tiny();
  while (c.layers() < n) c.blocks.push_back(c.blocks.back());
  c.blocks.resize(static_cast<size_t>(n));
  c.boundaryBytes.assign(static_cast<size_t>(n) + 1, 4096);
  c.shared.clear();
  const ChainCost cost = chainCostOf(c);
  const Schedule s = placementSchedule(segs, n, "test");
  validateSchedule(s, cost);
  RC_ASSERT(placementOf(s) == segs);
  const std::vector<int64_t> calls = forwardCalls(s);
  for (const Segment& g : segs)
    for (int i = g.first; i <= g.last; ++i) RC_ASSERT(calls[static_cast<size_t>(i)] == (g.recompute ? 2 : 1));
}

// segments:budget=B at budgets from its least to store-all's peak: it fits, it is a placement, and it recomputes
// no more FLOPs than any uniform split (a placement too) that fits the same budget.
RC_GTEST_PROP(Segments, fitsAndBeatsEveryUniformSplitThatFits, ()) {
  const int n = *rc::gen::inRange(1, 24);
  ChainCosts c = tiny();
  for (int i = 0; i < n; ++i) {
    ProfiledBlock b = c.blocks[static_cast<size_t>(i % 5)];
    b.name = "b" + std::to_string(i);
    const int64_t scale = *rc::gen::inRange(1, 8);
    for (ProfiledOp& op : b.ops) op.savedBytes *= scale;
    b.savesInput = *rc::gen::arbitrary<bool>();
    if (i < static_cast<int>(c.blocks.size())) c.blocks[static_cast<size_t>(i)] = b;
    else c.blocks.push_back(b);
  }
  c.blocks.resize(static_cast<size_t>(n));
  c.boundaryBytes.clear();
  for (int i = 0; i <= n; ++i) c.boundaryBytes.push_back(1024 * *rc::gen::inRange(1, 9));
  c.shared.clear();
  const ChainCost cost = chainCostOf(c);
  const int64_t full = planSchedule(storeAllSchedule(cost), cost).peakActivationBytes;
  const int64_t least = segmentsMinBudget(cost);
  RC_ASSERT(least <= full);
  const int64_t budget = least + (full - least) * *rc::gen::inRange(0, 1001) / 1000;
  const Schedule s = makeSchedule(parsePolicy("segments:budget=" + std::to_string(budget)), cost);
  const Plan p = planSchedule(s, cost);
  RC_ASSERT(p.peakActivationBytes <= budget);
  RC_ASSERT(placementOrWhy(s, nullptr).has_value());
  for (int k = 1; k <= n; ++k) {
    const Plan u = planSchedule(uniformSchedule(cost, k), cost);
    if (u.peakActivationBytes <= budget) RC_ASSERT(p.flops.recompute <= u.flops.recompute);
  }
  if (least > 1) {
    try {
      makeSchedule(parsePolicy("segments:budget=" + std::to_string(least - 1)), cost);
      RC_FAIL("a budget below the least was met");
    } catch (const InputError& e) {
      RC_ASSERT(std::string(e.what()).find("the smallest feasible budget is " + std::to_string(least) + " bytes") !=
                std::string::npos);
    }
  }
}

// The programme earns its place: over a sweep of budgets on the fixture, some budget is met with less recompute
// than any plain split that fits it (uniform's K segments, or every block recomputed alone but the last), so the
// answer there is one only the programme found.
TEST(Segments, beatsEveryUniformSplitSomewhereOnTheFixture) {
  const ChainCost cost = chainCostOf(tiny());
  const int64_t full = planSchedule(storeAllSchedule(cost), cost).peakActivationBytes;
  int strictly = 0;
  for (int i = 1; i <= 20; ++i) {
    const int64_t budget = full * i / 20;
    if (budget < segmentsMinBudget(cost)) continue;
    const int64_t seg = planSchedule(segmentsSchedule(cost, budget), cost).flops.recompute;
    std::vector<Schedule> splits;
    for (int k = 1; k <= cost.layers(); ++k) splits.push_back(uniformSchedule(cost, k));
    std::vector<Segment> singles;
    for (int b = 0; b < cost.layers(); ++b) singles.push_back({b, b, b + 1 < cost.layers()});
    splits.push_back(placementSchedule(singles, cost.layers(), "singles"));
    bool anyFits = false, beaten = true;
    for (const Schedule& split : splits) {
      const Plan u = planSchedule(split, cost);
      if (u.peakActivationBytes > budget) continue;
      anyFits = true;
      beaten = beaten && seg < u.flops.recompute;
    }
    strictly += anyFits && beaten;
  }
  EXPECT_GE(strictly, 1);
}

PlacementFile placementOfTiny(const std::string& policy, const test::ScratchDir& dir) {
  const ChainCosts c = tiny();
  const ChainCost cost = chainCostOf(c);
  const Schedule s = makeSchedule(parsePolicy(policy), cost);
  const auto path = dir.path() / "placement.json";
  std::ofstream(path) << placementJson(c, cost, s, placementOf(s)).dump(1);
  return loadPlacementFile(path.string());
}

json measuredAsPredicted(const PlacementFile& p) {
  return {{"saved_bytes", p.savedBytes},
          {"saved_bytes_before", p.savedBefore},
          {"saved_bytes_after", p.savedAfter},
          {"saved_bytes_by_block", p.savedByBlock},
          {"forward_calls", p.forwardCalls}};
}

TEST(PlanCheck, holdsWhenPyTorchDidAsPlannedAndNamesTheFirstDivergence) {
  const test::ScratchDir dir("plan-check");
  const PlacementFile p = placementOfTiny("uniform:k=2", dir);
  EXPECT_EQ(p.forwardCalls, (std::vector<int64_t>{2, 2, 1, 1, 1}));
  json m = measuredAsPredicted(p);
  const PlanOutcome ok = checkPlan(p, m, 0.1, 0.12);
  EXPECT_FALSE(ok.finding) << ok.why;
  ASSERT_TRUE(ok.measuredTime);
  EXPECT_NEAR(*ok.measuredTime, 0.2, 1e-12);
  EXPECT_EQ(ok.timedPairs, 0);  // the two runs' own step times: no pairs, no spread
  EXPECT_FALSE(ok.measuredTimeMiddleHalf);
  // Side-by-side pairs: the median of their ratios, and their 25th and 75th percentiles, linear between ranks
  // (ratios - 1 sorted: 0, 0.1, 0.2, 0.3, 0.4; ranks 1 and 3).
  json timed = m;
  timed["timing"] = {{"plain", {1.0, 2.0, 1.0, 2.0, 1.0}}, {"checkpoint", {1.3, 2.0, 1.1, 2.8, 1.2}}};
  const PlanOutcome pairs = checkPlan(p, timed, 0.1, 0.12);
  EXPECT_EQ(pairs.timedPairs, 5);
  EXPECT_NEAR(*pairs.measuredTime, 0.2, 1e-12);
  ASSERT_TRUE(pairs.measuredTimeMiddleHalf);
  EXPECT_NEAR(pairs.measuredTimeMiddleHalf->first, 0.1, 1e-12);
  EXPECT_NEAR(pairs.measuredTimeMiddleHalf->second, 0.3, 1e-12);
  timed["timing"]["plain"].push_back(1.0);  // six pairs: between ranks (1.25 and 3.75 of 0 .. 0.5)
  timed["timing"]["checkpoint"].push_back(1.5);
  const PlanOutcome six = checkPlan(p, timed, 0.1, 0.12);
  EXPECT_NEAR(*six.measuredTime, 0.25, 1e-12);
  EXPECT_NEAR(six.measuredTimeMiddleHalf->first, 0.125, 1e-12);
  EXPECT_NEAR(six.measuredTimeMiddleHalf->second, 0.375, 1e-12);
  m["saved_bytes_by_block"][3] = p.savedByBlock[3] + 64;
  m["saved_bytes"] = p.savedBytes + 64;
  const PlanOutcome bytes = checkPlan(p, m, 0.1, 0.12);
  EXPECT_TRUE(bytes.finding);
  EXPECT_EQ(bytes.why.rfind("saved activation bytes differ from the plan first at block 3 (h.3): predicted " +
                                std::to_string(p.savedByBlock[3]) + ", PyTorch saved " +
                                std::to_string(p.savedByBlock[3] + 64),
                            0),
            0u)
      << bytes.why;
  m = measuredAsPredicted(p);
  m["forward_calls"][1] = 3;
  const PlanOutcome calls = checkPlan(p, m, 0.1, 0.12);
  EXPECT_EQ(calls.why, "block h.1 ran 3 time(s) in the step, the plan says 2");
}

// The peak: predicted is the planner's peak plus what the part before the chain saves; a measured peak up to
// kPeakTolerance above it holds (the working set inside a block's backward the planner does not model), as does
// any below it; beyond it, a finding that says the saved bytes were as planned. Not measured: not checked.
TEST(PlanCheck, peakBeyondTheToleranceIsAFindingAndBelowItHolds) {
  const test::ScratchDir dir("plan-check-peak");
  const PlacementFile p = placementOfTiny("uniform:k=2", dir);
  const json m = measuredAsPredicted(p);
  const int64_t predicted = p.peakBytes + p.savedBefore;
  ASSERT_GT(p.peakBytes, 0);
  const PlanOutcome unmeasured = checkPlan(p, m, 0.1, 0.12);
  EXPECT_FALSE(unmeasured.finding);
  EXPECT_FALSE(unmeasured.measuredPeak);
  EXPECT_EQ(unmeasured.predictedPeak, predicted);
  const auto atMost = static_cast<int64_t>(static_cast<double>(predicted) * (1.0 + kPeakTolerance));
  for (const int64_t measured : {int64_t{0}, predicted / 2, predicted, atMost}) {
    const PlanOutcome o = checkPlan(p, m, 0.1, 0.12, measured);
    EXPECT_FALSE(o.finding) << measured << ": " << o.why;
    EXPECT_EQ(o.measuredPeak, measured);
  }
  const PlanOutcome over = checkPlan(p, m, 0.1, 0.12, atMost + 1);
  EXPECT_TRUE(over.finding);
  EXPECT_EQ(over.why.rfind("the step's peak exceeds the plan: predicted " + std::to_string(predicted) + " B (planned " +
                               std::to_string(p.peakBytes) + " + " + std::to_string(p.savedBefore) +
                               " saved before the chain), torch.profiler measured " + std::to_string(atMost + 1),
                           0),
            0u)
      << over.why;
  json bytes = m;  // a saved-bytes divergence is named first
  bytes["saved_bytes_by_block"][0] = p.savedByBlock[0] + 8;
  EXPECT_EQ(checkPlan(p, bytes, 0.1, 0.12, 2 * predicted).why.rfind("saved activation bytes differ", 0), 0u);
}

TEST(PlanCli, writesAPlacementAndPicksTheCheapestUnderABudget) {
  const test::ScratchDir dir("plan-cli");
  const std::string out = (dir.path() / "p.json").string();
  auto r = test::runCkptcheck(
      {"plan", "--costs", tinyPath().string(), "--policy", "uniform:k=2", "--placement", out, "--json"});
  ASSERT_EQ(r.exitCode(), 0) << r.err;
  const json j = json::parse(r.out);
  const PlacementFile p = loadPlacementFile(out);
  EXPECT_EQ(j["saved_bytes"].get<int64_t>(), p.savedBytes);
  EXPECT_EQ(p.policy, "uniform:k=2");
  EXPECT_EQ(j["expressible"], true);

  const ChainCost cost = chainCostOf(tiny());
  const int64_t full = planSchedule(storeAllSchedule(cost), cost).peakActivationBytes;
  const int64_t least = segmentsMinBudget(cost);
  r = test::runCkptcheck(
      {"plan", "--costs", tinyPath().string(), "--budget", std::to_string(least), "--placement", out, "--json"});
  ASSERT_EQ(r.exitCode(), 0) << r.err;
  EXPECT_LE(json::parse(r.out)["peak_activation_bytes"].get<int64_t>(), least);
  r = test::runCkptcheck({"plan", "--costs", tinyPath().string(), "--budget", std::to_string(full), "--json"});
  ASSERT_EQ(r.exitCode(), 0) << r.err;
  EXPECT_EQ(json::parse(r.out)["flop_overhead"].get<double>(), 0.0);  // store-all fits: nothing recomputed

  r = test::runCkptcheck(
      {"plan", "--costs", tinyPath().string(), "--budget", std::to_string(costsMinBudget(cost) - 1)});
  EXPECT_EQ(r.exitCode(), 2);
  EXPECT_EQ(r.err, "ckptcheck: plan: --budget " + std::to_string(costsMinBudget(cost) - 1) +
                       " is below the smallest feasible budget, " + std::to_string(costsMinBudget(cost)) + " bytes\n");
  r = test::runCkptcheck({"plan", "--costs", tinyPath().string(), "--policy", "recursive", "--placement", out});
  EXPECT_EQ(r.exitCode(), 2);
  EXPECT_NE(r.err.find("policy 'recursive' cannot be applied as a per-module placement: block"), std::string::npos)
      << r.err;
}

}  // namespace
}  // namespace ckpt
