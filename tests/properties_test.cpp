// Every property of the table (harness/verify/properties.h) with RapidCheck: random cases (1-40 blocks of every
// kind, both generator models, dropout on and off, 1-3 steps, float and double) under every policy family with
// random parameters, on the correct engine.
// The invariants themselves live in harness/verify/properties.h, the one home they share with `ckptcheck verify`;
// a counterexample prints as the case JSON `ckptcheck run --case` accepts.
// Reproduce a failure with RC_PARAMS="reproduce=..." (printed by RapidCheck), vary with RC_PARAMS="seed=N".
#include <gtest/gtest.h>
#include <rapidcheck/gtest.h>

#include <algorithm>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

#include "common/input_error.h"
#include "harness/engine/plan.h"
#include "harness/engine/policy.h"
#include "harness/verify/policy_draw.h"
#include "harness/verify/search.h"
#include "tests/test_util.h"

namespace ckpt {
namespace {

// A random case under every policy family, run by the correct engine; the spread of inputs is tagged. The case
// and the policy parameters are separate picks, so a counterexample prints the case alone as pasteable JSON.
Trial randomTrial() {
  const VerifyCase c{*genCase(verifyLimits()), *genPolicyDraw()};
  bool bn = false;
  for (const auto& b : c.spec.blocks) bn |= b.kind == blockKind("residual-bn");
  RC_CLASSIFY(c.spec.blocks.size() <= 4, "1-4 blocks");
  RC_CLASSIFY(c.spec.dropout > 0 && c.spec.rng == RngModel::kStateful, "stateful dropout");
  RC_CLASSIFY(c.spec.dropout > 0 && c.spec.rng == RngModel::kCounter, "counter dropout");
  RC_CLASSIFY(bn, "batchnorm");
  RC_CLASSIFY(c.spec.steps > 1, "several steps");
  RC_CLASSIFY(c.draw.longLayers > 0, "long chain planned");
  static const EngineVariant correct;
  Trial t = runTrial(c.spec, policiesFor(c, {}), correct);
  t.longLayers = c.draw.longLayers;
  t.longBudget = c.draw.longBudget;
  return t;
}

std::string describe(const std::optional<Violation>& v) {
  return v ? v->policy + ": " + v->message : std::string("holds");
}

// Every property of the table on random trials of the correct engine, one test a record (a new property needs no
// new test). rc::check reads RC_PARAMS like RapidCheck's gtest macros, so ci/properties' seeds reach it.
class PropertyHolds : public ::testing::TestWithParam<std::string> {};  // a property's id

TEST_P(PropertyHolds, onRandomTrialsOfTheCorrectEngine) {
  const Property p = findProperty(GetParam());
  ASSERT_NE(p, nullptr);
  EXPECT_TRUE(rc::check(p->id,
                        [p] {
                          const auto v = checkProperty(p, randomTrial());
                          RC_LOG() << describe(v) << "\n";
                          RC_ASSERT(!v.has_value());
                        }))
      << "property " << propertyNumber(p) << " (" << p->id << "): " << p->title;
}

std::vector<std::string> everyPropertyId() {
  std::vector<std::string> v;
  for (const PropertyDef& p : properties()) v.push_back(p.id);
  return v;
}

INSTANTIATE_TEST_SUITE_P(Records, PropertyHolds, ::testing::ValuesIn(everyPropertyId()),
                         [](const ::testing::TestParamInfo<std::string>& p) { return test::testName(p.param); });

// The property of an id, checked on a trial.
std::optional<Violation> check(const char* id, const Trial& t) {
  const Property p = findProperty(id);
  if (!p) throw std::logic_error(std::string("no property '") + id + "'");
  return checkProperty(p, t);
}

TEST(Properties, recordsAreNumberedInTableOrderWithDistinctIds) {
  ASSERT_FALSE(properties().empty());
  for (const PropertyDef& p : properties()) {
    EXPECT_EQ(findProperty(p.id), &p);
    EXPECT_EQ(&properties()[static_cast<size_t>(propertyNumber(&p) - 1)], &p);
    EXPECT_TRUE(p.check && p.title && *p.title) << p.id;
  }
  EXPECT_EQ(propertyNumber(findProperty("bitwise-equal")), 1);
  EXPECT_EQ(findProperty("no-such-property"), nullptr);
}

// A property that cannot even be evaluated (here: a policy string whose parameter does not parse, so the bounds
// property throws) reports that as its violation instead of aborting the run.
TEST(Properties, aPropertyThatThrowsIsAViolation) {
  CaseSpec spec;
  spec.blocks = {BlockSpec{blockKind("mlp")}, BlockSpec{blockKind("mlp")}};
  Trial t = runTrial(spec, {"uniform:k=2"}, EngineVariant());
  ASSERT_FALSE(check("bounds", t));
  t.runs[0].schedule.policy = "uniform:k=two";
  const auto v = check("bounds", t);
  ASSERT_TRUE(v);
  EXPECT_EQ(v->property, findProperty("bounds"));
  EXPECT_NE(v->message.find("checking it failed"), std::string::npos) << v->message;
}

// The properties must be able to fail: a schedule that skips a backward, a plan that is off by one byte, a
// policy over its bound and a differing gradient are each reported by their property alone.
TEST(Properties, eachPropertyReportsItsOwnViolation) {
  CaseSpec spec;
  spec.blocks = {BlockSpec{blockKind("mlp")}, BlockSpec{blockKind("residual-bn")}, BlockSpec{blockKind("mlp")}};
  spec.dropout = 0.5;
  spec.steps = 2;
  Trial t = runTrial(spec, {"store-all", "uniform:k=2", "revolve:slots=2"}, EngineVariant());
  for (const PropertyDef& p : properties()) EXPECT_FALSE(checkProperty(&p, t)) << p.id;

  Trial planOff = t;
  planOff.runs[1].plan.peakActivationBytes += 1;
  EXPECT_EQ(check("planned-equals-measured", planOff)->property, findProperty("planned-equals-measured"));
  EXPECT_FALSE(check("bitwise-equal", planOff));

  Trial overBound = t;
  overBound.runs[0].measured[0].forwardEvals += 1;  // store-all "recomputed" a block
  overBound.runs[0].plan.forwardEvals += 1;
  EXPECT_EQ(check("bounds", overBound)->policy, "store-all");
  Trial revolveOff = t;
  revolveOff.runs[2].measured[0].forwardEvals -= 1;
  EXPECT_EQ(check("bounds", revolveOff)->policy, "revolve:slots=2");

  Trial differs = t;
  differs.runs[1].comparison.bitwiseEqual = false;
  differs.runs[1].comparison.differences.push_back(Difference{0, "input_grad", "", 3, "1", "2", 1, 2, 1, 1});
  const auto v = check("bitwise-equal", differs);
  ASSERT_TRUE(v);
  EXPECT_EQ(v->policy, "uniform:k=2");
  EXPECT_EQ(v->difference->tensor, "input_grad");

  // The optimal DP's prediction against the planner (property 5), on the trial's chain and on a long one.
  Trial withOptimal = runTrial(spec, {"optimal:budget=100000000"}, EngineVariant());
  withOptimal.longLayers = 300;
  withOptimal.longBudget = 400;
  EXPECT_FALSE(check("optimal-plan-consistent", withOptimal));

  // Property 6: a placement whose schedule plans other than the policy's (here: the run's plan made off by a
  // byte), and a segments schedule that is no placement.
  const int64_t least = segmentsMinBudget(t.cost);
  Trial placements = runTrial(spec, {"uniform:k=2", "segments:budget=" + std::to_string(least)}, EngineVariant());
  EXPECT_FALSE(check("placement-round-trip", placements));
  Trial placementOff = placements;
  placementOff.runs[0].plan.peakActivationBytes += 1;
  const auto off = check("placement-round-trip", placementOff);
  ASSERT_TRUE(off);
  EXPECT_EQ(off->property, findProperty("placement-round-trip"));
  EXPECT_NE(off->message.find("plans peak_activation_bytes"), std::string::npos) << off->message;
  Trial notAPlacement = placements;
  notAPlacement.runs[1].schedule = revolveSchedule(t.cost, 1);
  notAPlacement.runs[1].schedule.policy = placements.runs[1].schedule.policy;
  const auto nested = check("placement-round-trip", notAPlacement);
  ASSERT_TRUE(nested);
  EXPECT_NE(nested->message.find("segments' schedule is no per-module placement"), std::string::npos)
      << nested->message;

  Trial invalid = runTrial(spec, {"optimal:budget=1"}, EngineVariant());  // infeasible: no schedule
  EXPECT_EQ(check("schedules-valid", invalid)->property, findProperty("schedules-valid"));
  EXPECT_FALSE(check("bitwise-equal", invalid));
}

// Policy draws resolve to strings every policy accepts, over each family's whole range.
TEST(PolicyDraw, resolvesEveryFamilyOverItsRange) {
  CaseSpec spec;
  spec.blocks.assign(5, BlockSpec{blockKind("transformer"), Activation::kGelu, 2});
  spec.width = 4;
  spec.seq = 2;
  const ChainCost cost = caseChainCost(spec);
  for (int permille : {0, 1, 500, 999, 1000}) {
    const PolicyDraw d{permille, permille, permille, static_cast<uint32_t>(permille % 512), permille % 4, 0};
    for (const auto& family : policyFamilies()) {
      const std::string p = resolvePolicy(family, d, cost);
      EXPECT_NO_THROW(makeSchedule(parsePolicy(p), cost)) << family << " -> " << p;
    }
  }
  const PolicyDraw lo{0, 0, 0, 0, 0, 0}, hi{1000, 1000, 1000, 0, 0, 0};
  EXPECT_EQ(resolvePolicy("uniform", lo, cost), "uniform:k=1");
  EXPECT_EQ(resolvePolicy("uniform", hi, cost), "uniform:k=5");
  EXPECT_EQ(resolvePolicy("revolve", hi, cost), "revolve:slots=5");
  EXPECT_EQ(resolvePolicy("segments", lo, cost), "segments:budget=" + std::to_string(segmentsMinBudget(cost)));
  EXPECT_EQ(resolvePolicy("segments", PolicyDraw{.segmentsBudget = 1000}, cost),
            "segments:budget=" + std::to_string(planSchedule(storeAllSchedule(cost), cost).peakActivationBytes));
  EXPECT_THROW(resolvePolicy("uniformish", lo, cost), InputError);
}

TEST(PolicyDraw, splitsAPolicyListKeepingOpKindLists) {
  EXPECT_EQ(splitPolicyList("uniform,selective:recompute=attention,dropout,revolve:slots=3"),
            (std::vector<std::string>{"uniform", "selective:recompute=attention,dropout", "revolve:slots=3"}));
}

}  // namespace
}  // namespace ckpt
