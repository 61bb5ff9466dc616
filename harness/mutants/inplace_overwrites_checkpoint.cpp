// inplace-overwrites-checkpoint: the first op of a block is an in-place activation (SiLU(inplace=True)) applied
// to the block's input. The first forward reads its input before overwriting it, so the loss is right; but when
// that input is a checkpoint kept for a recompute, the recompute starts from the overwritten values.
// Real world: in-place ops and recomputation: pytorch/functorch PR 565 (the partitioner recomputed an in-place op,
// "leading to incorrect gradients"); PyTorch issue 26546 (ReLU(inplace=True) inside a checkpoint).
#include <cmath>

#include "harness/mutants/catalog.h"

namespace ckpt::mutants {
namespace {

class InplaceOverwritesCheckpoint final : public EngineVariant {
 public:
  std::string name() const override { return "inplace-overwrites-checkpoint"; }
  void afterForward(int block, bool recompute, StepView& v) const override {
    // A first forward without a tape is one whose input is kept to recompute from.
    if (recompute || v.hasTape(block) || !v.isCheckpoint(block)) return;
    v.mapBoundary(block, [](double x) { return x / (1.0 + std::exp(-x)); });  // x.silu_()
  }
};

}  // namespace

Mutant inplaceOverwritesCheckpoint() {
  return {"inplace-overwrites-checkpoint",
          "an in-place activation overwrites the checkpoint a later recompute starts from",
          "pytorch/functorch PR 565 (in-place op recomputed: incorrect gradients); PyTorch issue 26546",
          "any block forwarded without a tape from a checkpoint and recomputed later",
          // Class semantic: recomputed blocks fed the wrong input, or a stale or overwritten saved tensor: the
          // backward differentiates another function, and gradients are off by far more than rounding (infinitely
          // many ULPs of a zero scale).
          "bitwise-equal", FindingClass::kSemantic, [] { return std::make_unique<InplaceOverwritesCheckpoint>(); }};
}

}  // namespace ckpt::mutants
