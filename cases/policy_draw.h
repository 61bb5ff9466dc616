// The random parameters of one verification case's policies, as permilles of each parameter's range on the case's
// chain (harness/verify/policy_draw.cpp resolves them; each policy's record says which field it reads,
// harness/engine/policy_rule.h). Drawn by genPolicyDraw (cases/generators.h); kept free of RapidCheck so the
// policies, which read it, need no test library.
#pragma once
#include <cstdint>

namespace ckpt {

struct PolicyDraw {
  int uniformK = 0;             // permille of [1, L]
  int revolveSlots = 0;         // permille of [1, L]
  int optimalBudget = 0;        // permille of [smallest feasible, store-all peak]
  uint32_t selectiveKinds = 0;  // bitmask over selectableOpKinds(); 0 = the default (every non-matmul op)
  int composedWith = 0;         // block policy composed with selective: index into the drawn block families
  int optimalRival = 0;         // which other policy of the case optimal is compared with (property 4), modulo
  int longLayers = 0;           // 0, or a homogeneous chain of this many blocks that optimal plans only (property 5)
  int longBudget = 0;           // permille of that chain's [smallest feasible, store-all peak]
  int segmentsBudget = 0;       // permille of [segments' smallest feasible budget, store-all peak]
  bool operator==(const PolicyDraw&) const = default;
};

}  // namespace ckpt
