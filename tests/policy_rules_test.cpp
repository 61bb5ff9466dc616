// The policy records (harness/engine/policy_rule.h): every part of ckptcheck that lists or draws policies derives
// from them, so these tests check the derivations against the records, and each record's bound against a run
// that meets it and one that does not.
#include <gtest/gtest.h>

#include <algorithm>
#include <set>

#include "cases/case_json.h"
#include "common/input_error.h"
#include "harness/engine/chain_cost.h"
#include "harness/engine/plan.h"
#include "harness/engine/policy_rule.h"
#include "harness/verify/policy_draw.h"
#include "tests/test_util.h"

namespace ckpt {
namespace {

ChainCost transformerCost() { return caseChainCost(loadCase(test::catalogueCase("transformer").string())); }

TEST(PolicyRules, namesAreUniqueAndEveryOneParses) {
  const ChainCost c = transformerCost();
  std::vector<std::string> names;
  for (const auto& r : policyRules()) {
    EXPECT_EQ(std::count(names.begin(), names.end(), r.name), 0) << r.name;
    names.push_back(r.name);
    EXPECT_EQ(findPolicyRule(r.name), &r);
    if (!r.byDefault) continue;
    for (const auto& s : r.byDefault(c)) {
      EXPECT_NO_THROW(makeSchedule(parsePolicy(s), c)) << s;
    }
  }
  EXPECT_EQ(findPolicyRule("no-such-policy"), nullptr);
}

// verify's families are the drawn records, selective, composed, and NAME+selective for each composable record;
// each resolves, on several draws, to a string of its own record that schedules.
TEST(PolicyRules, everyFamilyResolvesToItsOwnRecord) {
  const ChainCost c = transformerCost();
  size_t drawn = 0, composable = 0;
  for (const auto& r : policyRules()) {
    drawn += r.draw != nullptr;
    composable += r.draw && r.drawComposed;
  }
  EXPECT_EQ(defaultPolicyFamilies().size(), drawn + 2);
  EXPECT_EQ(policyFamilies().size(), drawn + 2 + composable);
  for (const std::string& family : policyFamilies()) {
    for (int permille : {0, 333, 1000}) {
      PolicyDraw d{permille, permille, permille, static_cast<uint32_t>(permille % 7), permille % 4, 0, 0, 0, permille};
      const std::string s = resolvePolicy(family, d, c);
      const PolicySpec p = parsePolicy(s);
      const bool composed = family == "composed" || family.find("+selective") != std::string::npos;
      EXPECT_EQ(p.selective, composed || family == "selective") << family << " -> " << s;
      if (!composed && family != "selective") {
        EXPECT_EQ(p.name, family) << s;
      }
      EXPECT_NO_THROW(validateSchedule(makeSchedule(p, c), c)) << s;
    }
  }
}

// The policy families `plan` accepts, from the records plan parses with: every record's name, and NAME+selective
// wherever the record's schedule maker takes op-level masks (tried on a chain, with the parameter verify would
// draw); selective alone. verify must draw each of them, but for two that stand for something else:
//  - schedule (schedule:FILE): the user's own schedule, in a file; verify cannot draw one, and runs it when named
//    (`--policies schedule:FILE`, on catalogue cases of its length: tests/schedule_file_test.cpp);
//  - store-all+selective: its schedule is selective's (store-all with the masks), checked here.
std::set<std::string> planFamilies(const ChainCost& c) {
  std::set<std::string> families;
  const PolicyDraw middle{.uniformK = 500, .revolveSlots = 500, .optimalBudget = 500, .segmentsBudget = 500};
  for (const auto& r : policyRules()) {
    families.insert(r.name);
    if (!r.make || r.takesRest) continue;
    // A parameter plan accepts on this chain: verify's draw, else the record's default; neither: the name alone
    // tells that verify cannot draw it.
    std::string policy = r.draw        ? r.draw(middle, c, [] { return std::vector<KeepMask>{}; })
                         : r.byDefault ? r.byDefault(c).front()
                                       : "";
    if (policy.empty()) continue;
    try {
      makeSchedule(parsePolicy(policy + "+selective"), c);
      families.insert(r.name + "+selective");
    } catch (const InputError&) {  // plan refuses the composition ("segments does not compose with selective")
    }
  }
  return families;
}

TEST(PolicyRules, verifyDrawsEveryFamilyPlanAccepts) {
  const ChainCost c = transformerCost();
  std::set<std::string> verify(policyFamilies().begin(), policyFamilies().end());
  EXPECT_EQ(verify.erase("composed"), 1u);
  const std::set<std::string> exempt = {"schedule", "store-all+selective"};
  for (const auto& e : exempt) EXPECT_FALSE(verify.count(e)) << e << " is drawn after all: take it off the exemptions";
  std::set<std::string> want = verify;
  want.insert(exempt.begin(), exempt.end());
  EXPECT_EQ(planFamilies(c), want);
  for (const auto& f : verify) EXPECT_NO_THROW(checkPolicyFamily(f)) << f;  // `verify --policies F`
  EXPECT_TRUE(verify.count("segments"));
  const Schedule a = makeSchedule(parsePolicy("store-all+selective"), c), b = makeSchedule(parsePolicy("selective"), c);
  EXPECT_EQ(a.instrs, b.instrs);
  EXPECT_EQ(a.keep, b.keep);
}

// segments:budget= is drawn over its whole feasible range: its least feasible budget at permille 0 (met: the
// schedule fits it), store-all's peak at 1000; its bound refuses a run over the budget or one that recomputes more
// than a uniform split fitting the budget.
TEST(PolicyRules, segmentsDrawReachesItsLeastAndLargestBudget) {
  for (const char* name : {"transformer", "tiny", "mlp-deep", "moe-tiny"}) {
    const ChainCost c = caseChainCost(loadCase(test::catalogueCase(name).string()));
    const int64_t full = planSchedule(storeAllSchedule(c), c).peakActivationBytes;
    const int64_t least = segmentsMinBudget(c);
    ASSERT_LE(least, full) << name;
    const std::function<std::vector<KeepMask>()> none = [] { return std::vector<KeepMask>{}; };
    const PolicyRule& r = *findPolicyRule("segments");
    EXPECT_EQ(r.draw(PolicyDraw{.segmentsBudget = 0}, c, none), "segments:budget=" + std::to_string(least)) << name;
    EXPECT_EQ(r.draw(PolicyDraw{.segmentsBudget = 1000}, c, none), "segments:budget=" + std::to_string(full)) << name;
    for (const int64_t budget : {least, full}) {
      const PolicySpec p = parsePolicy("segments:budget=" + std::to_string(budget));
      const Plan plan = planSchedule(makeSchedule(p, c), c);
      EXPECT_LE(plan.peakActivationBytes, budget) << name;
      const std::function<int64_t()> m = [] { return int64_t{0}; };
      EXPECT_EQ(r.bound({p, c, plan.peakActivationBytes, plan.forwardEvals, plan.flops.recompute, m}), "") << name;
      EXPECT_NE(r.bound({p, c, budget + 1, plan.forwardEvals, plan.flops.recompute, m}), "") << name;
      // uniform:k=1 is store-all: at store-all's peak no recompute is needed.
      if (budget == full) {
        EXPECT_NE(r.bound({p, c, plan.peakActivationBytes, plan.forwardEvals, 1, m}), "") << name;
      }
    }
  }
}

TEST(PolicyRules, defaultPoliciesFollowTheRecords) {
  const ChainCost c = transformerCost();
  std::vector<std::string> want;
  for (const auto& r : policyRules())
    if (r.byDefault)
      for (const auto& s : r.byDefault(c)) want.push_back(s);
  EXPECT_EQ(defaultPolicies(c), want);
  EXPECT_GE(want.size(), 7u);
}

// Each bound holds on the planner's own figures for the policy's schedule and fails when the run is made worse in
// the quantity the bound is about.
TEST(PolicyRules, boundsAcceptThePlanAndRefuseAWorseRun) {
  const ChainCost c = transformerCost();
  // M as property 4 defines it: the largest store-all peak of one block of the chain trained alone.
  const std::function<int64_t()> m = [&] {
    int64_t largest = 0;
    for (const BlockProgram& p : c.programs) {
      ChainCost one = c;
      one.programs = {p};
      one.programOf = {0};
      largest = std::max(largest, planSchedule(storeAllSchedule(one), one).peakActivationBytes);
    }
    return largest;
  };
  int checked = 0;
  for (const auto& r : policyRules()) {
    if (!r.bound || !r.byDefault) continue;
    const PolicySpec p = parsePolicy(r.byDefault(c).front());
    const Schedule s = makeSchedule(p, c);
    const PolicySpec canonical = parsePolicy(s.policy);
    const Plan plan = planSchedule(s, c);
    EXPECT_EQ(r.bound({canonical, c, plan.peakActivationBytes, plan.forwardEvals, plan.flops.recompute, m}), "")
        << s.policy;
    const std::string worse = r.bound({canonical, c, plan.peakActivationBytes * 1000 + (int64_t{1} << 40),
                                       plan.forwardEvals + 1, plan.flops.recompute + 1, m});
    EXPECT_NE(worse, "") << s.policy;
    EXPECT_EQ(worse.find('\n'), std::string::npos) << worse;
    ++checked;
  }
  EXPECT_GE(checked, 5);  // store-all, uniform, recursive, revolve, optimal
}

}  // namespace
}  // namespace ckpt
