// Policies are pure functions ChainCost -> Schedule, selected by a policy string:
//   store-all | uniform[:k=K] | recursive | revolve:slots=C | optimal:budget=BYTES | segments:budget=BYTES
//   selective[:recompute=KIND,KIND...]   (op-level; alone it composes with store-all)
//   BLOCKPOLICY+selective[...]           (block policy with op-level masks on every tape)
//   schedule:FILE                        (an explicit schedule from a file; composes with nothing)
// One file per policy under harness/policies/.
#pragma once
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "harness/engine/chain_cost.h"
#include "harness/engine/schedule.h"

namespace ckpt {

struct PolicySpec {
  std::string name;                           // store-all, uniform, recursive, revolve, optimal
  std::map<std::string, std::string> params;  // k, slots, budget, file
  bool selective = false;
  bool blockGiven = true;                   // false for "selective" alone (store-all with op-level masks)
  std::vector<std::string> recomputeKinds;  // selective: op kinds to drop (default: every non-matmul op)
  std::string text;                         // canonical string
};

// Throws InputError naming the bad part: "policy 'revolve': needs slots=C (C >= 1)".
PolicySpec parsePolicy(const std::string& text);
Schedule makeSchedule(const PolicySpec& p, const ChainCost& c);
// Every policy name, with a default parameterisation usable on any chain (for "every policy" loops); without
// the policies whose default needs quadratic planning (PolicyRule::quadraticDefault) when `quadratic` is false.
std::vector<std::string> defaultPolicies(const ChainCost& c, bool quadratic = true);

// The policies (harness/policies/*.cpp).
Schedule storeAllSchedule(const ChainCost& c);
Schedule uniformSchedule(const ChainCost& c, int segments);
Schedule recursiveSchedule(const ChainCost& c);
Schedule revolveSchedule(const ChainCost& c, int slots);
// Minimises recompute FLOPs with planned peak <= budget; throws InputError stating the smallest feasible budget.
Schedule optimalSchedule(const ChainCost& c, int64_t budgetBytes);
// The least peak the optimal policy can reach on `c` (its smallest feasible budget).
int64_t optimalMinBudget(const ChainCost& c);
// segments:budget=BYTES (harness/policies/segments.cpp): the least-recompute placement (harness/engine/
// placement.h) whose planned peak fits; throws InputError stating the smallest feasible budget. Both refuse a
// chain of more than kSegmentsMaxBlocks blocks (InputError): its search is O(L^2 x 400) a try, and 3000
// identical blocks took 20 s on a loaded 2-core machine, 10000 over 200 s (optimal refuses long chains too).
inline constexpr int kSegmentsMaxBlocks = 2000;
Schedule segmentsSchedule(const ChainCost& c, int64_t budgetBytes);
int64_t segmentsMinBudget(const ChainCost& c);
std::vector<KeepMask> selectiveMasks(const ChainCost& c, const std::vector<std::string>& recomputeKinds);
// schedule:FILE (harness/policies/schedule_file.cpp). fileSchedule reads FILE, refuses it unless it is for c's
// chain length and passes validateSchedule; its policy string is "schedule:FILE". All three throw InputError
// naming the file and the first bad field or instruction.
Schedule fileSchedule(const std::string& path, const ChainCost& c);
Schedule readScheduleFile(const std::string& path);    // read and parsed, not checked against a chain
Schedule scheduleFromJson(const nlohmann::json& doc);  // a schedule object, or plan --schedule --json's output
// The op kinds selective:recompute=... accepts.
const std::vector<std::string>& selectableOpKinds();

}  // namespace ckpt
