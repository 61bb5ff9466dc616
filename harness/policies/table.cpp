// The policies: one line each, in the order verify's families and defaultPolicies() follow. A new policy is a
// file in this folder (its schedule maker and its record, NAMERule()) and a line here.
#include "harness/engine/policy_rule.h"

namespace ckpt {

PolicyRule storeAllRule();
PolicyRule uniformRule();
PolicyRule recursiveRule();
PolicyRule revolveRule();
PolicyRule optimalRule();
PolicyRule segmentsRule();
PolicyRule selectiveRule();
PolicyRule scheduleFileRule();

const std::vector<PolicyRule>& policyRules() {
  static const std::vector<PolicyRule> table = {
      storeAllRule(), uniformRule(),  recursiveRule(), revolveRule(),
      optimalRule(),  segmentsRule(), selectiveRule(), scheduleFileRule(),
  };
  return table;
}

}  // namespace ckpt
