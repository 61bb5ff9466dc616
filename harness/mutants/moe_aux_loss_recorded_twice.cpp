// moe-aux-loss-recorded-twice: a recompute of an MoE layer records its side effects again, the load-balancing
// loss into the tracker the step's loss reads and the routed tokens into the per-expert counts, while BatchNorm's
// statistics are restored as they should be. Gradients are unaffected; the loss the step reports and the module
// state after it are not.
// Real world: NVIDIA/Megatron-LM issues 1478 and 1514 (the MoE auxiliary loss saved to its tracker a second time
// during activation recompute, so the logged load-balancing loss doubled).
#include "harness/mutants/catalog.h"

namespace ckpt::mutants {
namespace {

class MoeAuxLossRecordedTwice final : public EngineVariant {
 public:
  std::string name() const override { return "moe-aux-loss-recorded-twice"; }
  BlockEnv recomputeEnv(BlockEnv env) const override {
    env.updateState = false;
    env.stateOp = "moe";
    return env;
  }
};

}  // namespace

Mutant moeAuxLossRecordedTwice() {
  return {"moe-aux-loss-recorded-twice",
          "recompute records an MoE layer's auxiliary loss and expert counts a second time",
          "NVIDIA/Megatron-LM issues 1478 / 1514 (MoE aux loss tracked again during recompute)",
          "an moe block recomputed (block-level, or its moe node dropped by selective)",
          // Class semantic: the expert counts and the aux-loss tracker moved again by the recompute: the loss that
          // reads the tracker differs too, and counts that move by whole tokens per expert are no momentum update, so
          // no narrower class than semantic fits (the report still names the loss and the buffers that differ).
          "bitwise-equal", FindingClass::kSemantic, [] { return std::make_unique<MoeAuxLossRecordedTwice>(); }};
}

}  // namespace ckpt::mutants
