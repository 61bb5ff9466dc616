// drop-path-redrawn: a recompute decides anew which samples drop their residual branch, from a generator the
// checkpoint does not restore (stochastic depth written with Python's `random`, or with its own torch.Generator),
// while every dropout mask replays. The backward then differentiates a network with other branches than the loss
// was computed on: a dropped sample's branch gets gradient, a kept one none.
// Real world: the bug class of allenai/OLMo-core PR 828 (preserve_rng_state hard-coded to False: recomputed
// stochastic layers drew fresh decisions; loss 2.495 with checkpointing vs 2.195 without after 150 steps), here
// for the one layer whose decision steers what is computed.
#include "harness/mutants/catalog.h"

namespace ckpt::mutants {
namespace {

class DropPathRedrawn final : public EngineVariant {
 public:
  std::string name() const override { return "drop-path-redrawn"; }
  BlockEnv recomputeEnv(BlockEnv env) const override {
    env.updateState = false;
    env.redrawOp = "drop_path";
    return env;
  }
};

}  // namespace

Mutant dropPathRedrawn() {
  return {"drop-path-redrawn", "recompute redraws the drop-path decisions from a generator it does not restore",
          "allenai/OLMo-core PR 828 (recomputed stochastic layers drew fresh decisions)",
          "a block with drop_path > 0 recomputed (block-level, or its drop_path dropped by selective)",
          // Class rng-desync: the redrawn decisions send gradient through other branches; with the draws off
          // (randomnessOff: no drop-path node) the runs agree bit for bit.
          "bitwise-equal", FindingClass::kRngDesync, [] { return std::make_unique<DropPathRedrawn>(); }};
}

}  // namespace ckpt::mutants
