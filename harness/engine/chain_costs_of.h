// The chain costs (costs_file.h, COSTS.md) a profiler would write for a chain ckptcheck models itself: what each
// block's tape holds after its forward, split into the boundaries it keeps (saves_input, saves_output) and the
// rest (its ops' saved bytes), its FLOPs, and the boundaries' sizes. verify's placement property
// (harness/verify/properties.h) predicts a placement's saved bytes from it (predictSaved) and checks them against
// the planner's walk of the same chain, so the prediction `plan --costs --placement` makes for a user's model is
// checked on random chains too.
#pragma once
#include "harness/engine/chain_cost.h"
#include "harness/engine/costs_file.h"

namespace ckpt {

// Block i's tape, as the block simulator leaves it (no keep mask: a placement's tapes are whole); nothing is
// shared between blocks but boundaries, and the part after the chain (the loss) saves x_L, which it holds.
ChainCosts chainCostsOf(const ChainCost& c);

}  // namespace ckpt
