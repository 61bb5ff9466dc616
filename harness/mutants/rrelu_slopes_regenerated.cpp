// rrelu-slopes-regenerated: RReLU's random slopes are drawn again when its context is rebuilt instead of coming
// back as the forward drew them (the noise treated as something to recompute from a fresh draw, not saved data),
// so the backward multiplies by other slopes than the forward applied, and a recomputed block's output moves.
// Real world: PyTorch issue 193671 (RReLU's noise not saved); PaddlePaddle PR 21298 (a recomputed random op drew
// a new seed, so its mask differed from the forward's).
#include "harness/mutants/catalog.h"

namespace ckpt::mutants {
namespace {

class RreluSlopesRegenerated final : public EngineVariant {
 public:
  std::string name() const override { return "rrelu-slopes-regenerated"; }
  BlockEnv recomputeEnv(BlockEnv env) const override {
    env.updateState = false;
    env.redrawOp = "rrelu";
    return env;
  }
};

}  // namespace

Mutant rreluSlopesRegenerated() {
  return {"rrelu-slopes-regenerated",
          "recompute regenerates RReLU's random slopes instead of reproducing the forward's",
          "PyTorch issue 193671 (RReLU noise not saved); PaddlePaddle PR 21298 (recompute redrew a random op's seed)",
          "an mlp block with rrelu recomputed (block-level, or its rrelu dropped by selective)",
          // Class rng-desync: other slopes in the recompute; with RReLU's range collapsed (randomnessOff) the runs
          // agree bit for bit.
          "bitwise-equal", FindingClass::kRngDesync, [] { return std::make_unique<RreluSlopesRegenerated>(); }};
}

}  // namespace ckpt::mutants
