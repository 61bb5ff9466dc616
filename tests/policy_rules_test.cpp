// The policy records (harness/engine/policy_rule.h): every part of ckptcheck that lists or draws policies derives
// from them, so these tests check the derivations against the records, and each record's bound against a run
// that meets it and one that does not.
#include <gtest/gtest.h>

#include <algorithm>

#include "cases/case_json.h"
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
      PolicyDraw d{permille, permille, permille, static_cast<uint32_t>(permille % 7), permille % 4, 0, 0, 0};
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
