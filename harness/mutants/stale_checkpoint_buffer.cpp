// stale-checkpoint-buffer: the engine's liveness count for a segment checkpoint is off by one, so it releases
// x_a as soon as the segment's second block has run, and the caching allocator hands that storage to the next
// boundary x_{a+2}. The first forward is unaffected; the later recompute of the segment starts from x_{a+2}'s
// values. (The chain input x_0 belongs to the caller and is never released.)
// Real world: activations freed or reused while a later pass still needs them: torchtune issue 1867
// (OffloadActivations(use_streams=True) NaN gradients from a tensor-deletion race), Megatron-LM issue 7398
// (a reload reading a staging buffer before it is filled: "the saved activation silently becomes stale").
#include "harness/mutants/catalog.h"

namespace ckpt::mutants {
namespace {

class StaleCheckpointBuffer final : public EngineVariant {
 public:
  std::string name() const override { return "stale-checkpoint-buffer"; }
  void afterForward(int block, bool recompute, StepView& v) const override {
    const int checkpoint = block - 1;  // the segment's input, two boundaries below the new x_{block+1}
    if (recompute || checkpoint < 1 || !v.isCheckpoint(checkpoint) || !v.held(block + 1)) return;
    v.copyBoundary(checkpoint, block + 1);  // its storage now belongs to x_{block+1}
  }
};

}  // namespace

Mutant staleCheckpointBuffer() {
  return {"stale-checkpoint-buffer",
          "a segment checkpoint's buffer is released early and reused for a later boundary while still needed",
          "torchtune#1867 (activation freed while still needed); Megatron-LM#7398 (stale reloaded activation)",
          "a segment of two or more blocks starting after x_0 that is recomputed later",
          // Class semantic: recomputed blocks fed the wrong input, or a stale or overwritten saved tensor: the
          // backward differentiates another function, and gradients are off by far more than rounding (infinitely
          // many ULPs of a zero scale).
          "bitwise-equal", FindingClass::kSemantic, [] { return std::make_unique<StaleCheckpointBuffer>(); }};
}

}  // namespace ckpt::mutants
