// Policy families and their random parameters: a PolicyDraw (cases/policy_draw.h, drawn by genPolicyDraw below)
// resolved against a chain gives the policy strings one verification case runs. Parameters range over everything a
// policy accepts on that chain: k and slots in [1, L], budgets between the smallest feasible and store-all's peak
// (with the same op-level masks when composed with selective), any subset of the selectable op kinds.
#pragma once
#include <string>
#include <vector>

#include "cases/generators.h"
#include "harness/engine/chain_cost.h"
#include "harness/engine/policy.h"

namespace ckpt {

// A permille with real mass at both ends of the range (15% exactly 0, 15% exactly 1000): the extremes of every
// policy parameter (uniform:k=L, revolve:slots=L, an optimal budget of exactly the least feasible or store-all's
// peak) come up in every few cases, not once in a thousand. Monotone, so it still shrinks toward 0.
inline rc::Gen<int> genPermilleWithEnds() {
  return rc::gen::map(rc::gen::resize(100, rc::gen::inRange(0, 1428)),
                      [](int v) { return std::clamp(v - 214, 0, 1000); });
}

// One case in twenty also plans a long homogeneous chain (100 to 1000 blocks), where the optimal DP works on a
// coarse grid (rounded levels, the least-peak fallback) that short chains never reach. Such a plan takes 0.1-0.5 s,
// so it stays rare enough for verify's throughput.
inline int longLayersFrom(int u) { return u < 950 ? 0 : 100 + (u - 950) * 18; }

// One past the largest selectiveKinds mask: every subset of selectableOpKinds() (the op table's kinds).
inline uint32_t selectiveKindsEnd() { return uint32_t{1} << selectableOpKinds().size(); }

// Every field of a PolicyDraw over its range.
inline rc::Gen<PolicyDraw> genPolicyDraw() {
  const uint32_t kindsEnd = selectiveKindsEnd();
  // Fixed size: every fraction of the range is as likely at any RapidCheck size (inRange scales with size).
  return rc::gen::resize(100, rc::gen::build<PolicyDraw>(
                                  rc::gen::set(&PolicyDraw::uniformK, genPermilleWithEnds()),
                                  rc::gen::set(&PolicyDraw::revolveSlots, genPermilleWithEnds()),
                                  rc::gen::set(&PolicyDraw::optimalBudget, genPermilleWithEnds()),
                                  rc::gen::set(&PolicyDraw::selectiveKinds, rc::gen::inRange<uint32_t>(0, kindsEnd)),
                                  rc::gen::set(&PolicyDraw::composedWith, rc::gen::inRange(0, 4)),
                                  rc::gen::set(&PolicyDraw::optimalRival, rc::gen::inRange(0, 64)),
                                  rc::gen::set(&PolicyDraw::longLayers, rc::gen::map(genPermille(), longLayersFrom)),
                                  rc::gen::set(&PolicyDraw::longBudget, genPermilleWithEnds()),
                                  // Last: a field added later takes the last split of the draw's generator, so
                                  // every earlier field draws what it drew before (rc::gen::tuple splits in order).
                                  rc::gen::set(&PolicyDraw::segmentsBudget, genPermilleWithEnds())));
}

// What `verify --policies` accepts: store-all, uniform, recursive, revolve, optimal, selective, composed (the
// draw's block policy + selective) and BLOCK+selective for each block policy. Anything with ':' is taken as a
// fixed policy string instead (e.g. uniform:k=4).
const std::vector<std::string>& policyFamilies();
// Every family, once: what a case runs by default.
const std::vector<std::string>& defaultPolicyFamilies();
bool isPolicyFamily(const std::string& name);
// Throws InputError unless `item` is a family or a policy string that parses.
void checkPolicyFamily(const std::string& item);

// The policy string of `family` for a draw on a chain. Throws InputError for an unknown family.
std::string resolvePolicy(const std::string& family, const PolicyDraw& d, const ChainCost& c);

// Every family a policy string can belong to (policyFamily): each record's name, NAME+selective for each block
// policy that is not a whole-rest one, and selective; at most 32, so a case's families are one bit each.
const std::vector<std::string>& runFamilies();
// The bit of `family` in runFamilies() order; 0 when it is none of them.
uint32_t familyBit(const std::string& family);

// Splits a --policies list on commas, keeping selective:recompute=a,b lists together.
std::vector<std::string> splitPolicyList(const std::string& list);

}  // namespace ckpt
