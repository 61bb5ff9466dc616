// Policy strings: what parses, its canonical form, and the one-line message for each kind of mistake.
#include <gtest/gtest.h>

#include <utility>

#include "common/input_error.h"
#include "harness/engine/policy.h"
#include "harness/engine/policy_rule.h"

namespace ckpt {
namespace {

std::string canonical(const std::string& text) { return parsePolicy(text).text; }

std::string error(const std::string& text) {
  try {
    parsePolicy(text);
  } catch (const InputError& e) {
    return e.what();
  }
  return "";
}

TEST(PolicyParse, acceptsEveryPolicy) {
  EXPECT_EQ(canonical("store-all"), "store-all");
  EXPECT_EQ(canonical("uniform"), "uniform");
  EXPECT_EQ(canonical("uniform:k=8"), "uniform:k=8");
  EXPECT_EQ(canonical("uniform:k=08"), "uniform:k=8");
  EXPECT_EQ(canonical("recursive"), "recursive");
  EXPECT_EQ(canonical("revolve:slots=3"), "revolve:slots=3");
  EXPECT_EQ(canonical("optimal:budget=1000000"), "optimal:budget=1000000");
  EXPECT_EQ(canonical("selective"), "selective");
  EXPECT_EQ(canonical("selective:recompute=attention,dropout,attention"), "selective:recompute=attention,dropout");
}

TEST(PolicyParse, composesABlockPolicyWithSelective) {
  const PolicySpec p = parsePolicy("uniform:k=4+selective:recompute=attention");
  EXPECT_EQ(p.name, "uniform");
  EXPECT_EQ(p.params.at("k"), "4");
  EXPECT_TRUE(p.selective);
  EXPECT_EQ(p.recomputeKinds, std::vector<std::string>{"attention"});
  EXPECT_EQ(p.text, "uniform:k=4+selective:recompute=attention");
  EXPECT_EQ(canonical("selective+revolve:slots=2"), "revolve:slots=2+selective");
  const PolicySpec alone = parsePolicy("selective");
  EXPECT_EQ(alone.name, "store-all");
  EXPECT_TRUE(alone.selective);
  EXPECT_TRUE(alone.recomputeKinds.empty());
}

TEST(PolicyParse, namesEachMistake) {
  EXPECT_EQ(error(""),
            "policy '': empty policy (known: store-all, uniform, recursive, revolve, optimal, segments, selective, "
            "schedule)");
  EXPECT_EQ(error("uniformm"),
            "policy 'uniformm': unknown policy 'uniformm' (known: store-all, uniform, recursive, revolve, optimal, "
            "segments, selective, schedule)");
  EXPECT_EQ(error("revolve"), "policy 'revolve': needs slots=C (C >= 1)");
  EXPECT_EQ(error("revolve:slots="), "policy 'revolve:slots=': needs slots=C (C >= 1)");
  EXPECT_EQ(error("revolve:slots=0"),
            "policy 'revolve:slots=0': revolve: slots must be an integer >= 1 and <= 2^30 (got '0')");
  EXPECT_EQ(error("uniform:k=two"),
            "policy 'uniform:k=two': uniform: k must be an integer >= 1 and <= 2^30 (got 'two')");
  EXPECT_EQ(error("uniform:k=-1"), "policy 'uniform:k=-1': uniform: k must be an integer >= 1 and <= 2^30 (got '-1')");
  EXPECT_EQ(error("uniform:j=3"), "policy 'uniform:j=3': uniform has no parameter 'j' (it takes k=K (K >= 1))");
  EXPECT_EQ(error("uniform:k=2:k=3"), "policy 'uniform:k=2:k=3': uniform: k given twice");
  EXPECT_EQ(error("store-all:k=3"), "policy 'store-all:k=3': store-all takes no parameters");
  EXPECT_EQ(error("optimal"), "policy 'optimal': needs budget=BYTES (BYTES >= 1)");
  EXPECT_EQ(error("optimal:budget=1e6"),
            "policy 'optimal:budget=1e6': optimal: budget must be an integer >= 1 (got '1e6')");
  EXPECT_EQ(error("uniform+recursive"),
            "policy 'uniform+recursive': two block policies ('uniform' and 'recursive') cannot be composed");
  EXPECT_EQ(error("selective+selective"), "policy 'selective+selective': selective given twice");
  EXPECT_EQ(error("a+b+c"), "policy 'a+b+c': at most one block policy and one selective part can be composed");
  EXPECT_EQ(error("selective:recompute=atention"),
            "policy 'selective:recompute=atention': selective: unknown op kind 'atention' (known: linear, gelu, relu, "
            "tanh, dropout, batchnorm, layernorm, attention, add, drop_path, rrelu, moe)");
  EXPECT_EQ(error("uniform+"), "policy 'uniform+': empty policy name");
  EXPECT_EQ(error("schedule"),
            "policy 'schedule': needs schedule:FILE (a schedule JSON as `ckptcheck plan --schedule --json` prints it)");
  EXPECT_EQ(error("revolve:slots=2+schedule:s.json"),
            "policy 'revolve:slots=2+schedule:s.json': schedule:FILE (a schedule JSON as `ckptcheck plan --schedule "
            "--json` prints it) cannot be composed with another policy");
}

// Nine blocks of the default kind, batch 2, width 4.
ChainCost nineBlocks() {
  CaseSpec spec;
  spec.batch = 2;
  spec.width = 4;
  spec.blocks = {BlockSpec{}};
  return homogeneousChainCost(spec, 9);
}

TEST(PolicyParse, defaultPoliciesAllParseAndSchedule) {
  const ChainCost c = nineBlocks();
  const auto names = defaultPolicies(c);
  EXPECT_GE(names.size(), 7u);
  for (const auto& n : names) EXPECT_NO_THROW(makeSchedule(parsePolicy(n), c)) << n;
}

// Families group the strings a report compares: parameters never split one, selective composed always does.
TEST(PolicyParse, familiesIgnoreParametersAndKeepComposition) {
  const std::pair<const char*, const char*> kFamilies[] = {
      {"store-all", "store-all"},
      {"revolve:slots=3", "revolve"},
      {"revolve:slots=7", "revolve"},
      {"uniform:k=8+selective", "uniform+selective"},
      {"optimal:budget=100", "optimal"},
      {"uniform:k=8+selective:recompute=gelu", "uniform+selective"},
      {"selective:recompute=dropout", "selective"}};
  for (const auto& [text, family] : kFamilies) EXPECT_EQ(policyFamily(parsePolicy(text)), family) << text;
}

// Without the quadratic ones (the planner benchmark at 10^5 blocks), the default list loses exactly the strings of
// the records marked quadraticDefault (optimal's), in the same order.
TEST(PolicyParse, defaultPoliciesWithoutQuadraticPlanningDropOnlyThose) {
  const ChainCost c = nineBlocks();
  std::vector<std::string> want;
  bool dropped = false;
  for (const auto& r : policyRules()) {
    if (!r.byDefault) continue;
    for (const auto& p : r.byDefault(c)) {
      if (r.quadraticDefault) dropped = true;
      else want.push_back(p);
    }
  }
  EXPECT_TRUE(dropped) << "optimal's default budget runs the least-peak DP";
  EXPECT_EQ(defaultPolicies(c, false), want);
  for (const auto& p : want) EXPECT_NE(policyFamily(parsePolicy(p)), "optimal") << p;
  EXPECT_EQ(findPolicyRule("optimal")->quadraticDefault, true);
}

}  // namespace
}  // namespace ckpt
