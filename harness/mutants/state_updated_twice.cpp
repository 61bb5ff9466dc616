// state-updated-twice: the recompute runs in training mode with state updates on, so every BatchNorm of a
// recomputed block moves its running statistics (and num_batches_tracked) a second time in the step.
// Gradients are unaffected; the module state after the step is not.
// Real world: PyTorch issue 96136 ("torch.utils.checkpoint should avoid updating BatchNorm statistics twice");
// fairscale's patch_batchnorm exists for the same reason.
#include "harness/mutants/catalog.h"

namespace ckpt::mutants {
namespace {

class StateUpdatedTwice final : public EngineVariant {
 public:
  std::string name() const override { return "state-updated-twice"; }
  BlockEnv recomputeEnv(BlockEnv env) const override { return env; }  // updateState stays true
};

}  // namespace

Mutant stateUpdatedTwice() {
  return {"state-updated-twice",
          "recompute updates module state again: BatchNorm running statistics move twice per step",
          "PyTorch issue 96136 (BatchNorm statistics updated twice under torch.utils.checkpoint)",
          "a residual-bn block recomputed (block-level, or its batchnorm dropped by selective)",
          // Class state-updated-twice: BatchNorm's running statistics and counter moved one more momentum update by
          // the recompute.
          "bitwise-equal", FindingClass::kStateUpdatedTwice, [] { return std::make_unique<StateUpdatedTwice>(); }};
}

}  // namespace ckpt::mutants
