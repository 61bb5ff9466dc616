// One record per policy: everything the rest of ckptcheck needs to know of it. A policy is a file under
// harness/policies/ that defines its schedule maker and its record (NAMERule()); policyRules()
// (harness/policies/table.cpp) lists the records. Parsing and canonical strings (parsePolicy), schedules
// (makeSchedule), the default list of "every policy" (defaultPolicies), verify's random families and draws
// (harness/verify/policy_draw.cpp) and property 4's bounds (harness/verify/properties.cpp) all read the records,
// so none of them names a policy.
#pragma once
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "cases/policy_draw.h"
#include "harness/engine/policy.h"

namespace ckpt {

// A parameter: its name, whether it is required, and what it means (for messages): "k=K (K >= 1)".
struct ParamRule {
  std::string key;
  bool required;
  std::string help;
};

// What property 4 knows of one run of the policy: its (canonical) policy, the chain, and what the executor
// measured (or the planner predicted, where the engine did not run).
struct BoundCheck {
  const PolicySpec& policy;
  const ChainCost& cost;
  int64_t peakBytes;
  int64_t forwardEvals;
  int64_t recomputeFlops;
  // M: the largest peak of one block trained alone under store-all; computed when a bound asks for it.
  const std::function<int64_t()>& largestLayerPeak;
};

struct PolicyRule {
  std::string name;
  std::vector<ParamRule> params;
  // The schedule on a chain; `keep` holds the op-level masks when the policy is composed with selective (only the
  // optimal DP needs them). Null for selective, which is not a block policy.
  Schedule (*make)(const PolicySpec& p, const ChainCost& c, const std::vector<KeepMask>& keep) = nullptr;
  // The rest of the string after "name:" is the one parameter, verbatim (a file path may hold ':', '+', '='), so
  // the policy composes with nothing.
  bool takesRest = false;
  // The policy strings of defaultPolicies(): a parameterisation usable on any chain. Null: not in that list.
  std::vector<std::string> (*byDefault)(const ChainCost& c) = nullptr;
  // Whether byDefault needs more than linear work in the chain's length (optimal's default budget runs the
  // least-peak DP, O(L^2) on a homogeneous chain): the planner benchmark leaves such policies out at 10^5 blocks.
  bool quadraticDefault = false;
  // verify's random draw: the policy string for a draw on a chain; `keep` gives the masks of the selective part
  // it is composed with (empty when alone). Null: verify does not draw the policy as a family of its own.
  std::string (*draw)(const PolicyDraw& d, const ChainCost& c,
                      const std::function<std::vector<KeepMask>()>& keep) = nullptr;
  // Whether verify also draws it composed with selective ("NAME+selective", and among "composed"). store-all is
  // not: store-all+selective is selective alone.
  bool drawComposed = false;
  // Property 4: "" when the run meets the policy's bound, else one line saying how it does not. Null: no bound.
  std::string (*bound)(const BoundCheck& b) = nullptr;
};

// Every policy, in a fixed order (verify's families and defaultPolicies() follow it): harness/policies/table.cpp.
const std::vector<PolicyRule>& policyRules();
// The record of a policy name; null when there is none.
const PolicyRule* findPolicyRule(const std::string& name);

// A policy's family: its block policy's name, "NAME+selective" when composed with selective, "selective" alone.
// Reports group runs by it ("revolve:slots=3" and "revolve:slots=7" are one family).
std::string policyFamily(const PolicySpec& p);

// Helpers the records share.
inline int roundSqrt(int n) { return std::max(1, static_cast<int>(std::lround(std::sqrt(static_cast<double>(n))))); }
// 1 + permille of [0, n - 1]: 0 -> 1, 1000 -> n.
inline int drawFraction(int permille, int n) {
  return 1 + static_cast<int>(static_cast<int64_t>(std::clamp(permille, 0, 1000)) * (n - 1) / 1000);
}
// Property 4 of a policy with a budget= parameter (optimal, segments): the run's peak fits the budget.
inline std::string budgetBound(const BoundCheck& b) {
  const int64_t budget = std::stoll(b.policy.params.at("budget"));
  if (b.peakBytes <= budget) return "";
  return "peak " + std::to_string(b.peakBytes) + " bytes over the budget " + std::to_string(budget);
}
// An integer parameter of a parsed policy (parsePolicy stores them canonical).
inline int64_t intParam(const PolicySpec& p, const char* key) { return std::stoll(p.params.at(key)); }

}  // namespace ckpt
