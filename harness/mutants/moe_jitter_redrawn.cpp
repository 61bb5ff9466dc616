// moe-jitter-redrawn: a recompute multiplies the router's input by fresh jitter, from a generator the checkpoint
// does not restore, while every other random op replays. Routing is decided by the jittered logits, so the
// recompute can send tokens to other experts (or drop others over capacity): the backward differentiates a
// network whose routing the loss never saw.
// Real world: allenai/OLMo-core PR 828 (preserve_rng_state hard-coded to False, so the MoE router's jitter was
// redrawn under activation checkpointing; loss 2.495 with checkpointing vs 2.195 without after 150 steps).
#include "harness/mutants/catalog.h"

namespace ckpt::mutants {
namespace {

class MoeJitterRedrawn final : public EngineVariant {
 public:
  std::string name() const override { return "moe-jitter-redrawn"; }
  BlockEnv recomputeEnv(BlockEnv env) const override {
    env.updateState = false;
    env.redrawOp = "moe";
    return env;
  }
};

}  // namespace

Mutant moeJitterRedrawn() {
  return {"moe-jitter-redrawn", "recompute redraws the MoE router's input jitter from a generator it does not restore",
          "allenai/OLMo-core PR 828 (router jitter redrawn under activation checkpointing)",
          "an moe block with router_jitter > 0 recomputed (block-level, or its moe node dropped by selective)",
          // Class rng-desync: other jitter in the recompute routes tokens differently; with the jitter off
          // (randomnessOff) the runs agree.
          "bitwise-equal", FindingClass::kRngDesync, [] { return std::make_unique<MoeJitterRedrawn>(); }};
}

}  // namespace ckpt::mutants
