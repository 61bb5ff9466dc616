// Policy families and their random parameters: a PolicyDraw (cases/generators.h) resolved against a chain gives
// the policy strings one verification case runs. Parameters range over everything a policy accepts on that chain:
// k and slots in [1, L], budgets between the smallest feasible and store-all's peak (with the same op-level masks
// when composed with selective), any subset of the selectable op kinds.
#pragma once
#include <string>
#include <vector>

#include "cases/generators.h"
#include "harness/engine/chain_cost.h"

namespace ckpt {

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

// Splits a --policies list on commas, keeping selective:recompute=a,b lists together.
std::vector<std::string> splitPolicyList(const std::string& list);

}  // namespace ckpt
