// grads-accumulated-twice: a gradient hook fires twice for blocks whose tape came from a recompute (once for the
// recompute's graph, once for the original), so their parameter gradients are accumulated twice.
// Real world: ooples/AiDotNet.Tensors PR 645 (multi-segment checkpointing double-counted every earlier segment's
// gradients); PyTorch's non-reentrant checkpoint rollout lists "gradient hooks are called once" as a required
// test (issue 65537).
#include "harness/mutants/catalog.h"

namespace ckpt::mutants {
namespace {

class GradsAccumulatedTwice final : public EngineVariant {
 public:
  std::string name() const override { return "grads-accumulated-twice"; }
  void afterBackward(int block, bool recomputed, StepView& v) const override {
    if (recomputed) v.mapParamGrads(block, [](double g) { return g + g; });
  }
};

}  // namespace

Mutant gradsAccumulatedTwice() {
  return {"grads-accumulated-twice",
          "parameter gradients of recomputed blocks are accumulated twice (a hook firing twice)",
          "ooples/AiDotNet.Tensors PR 645 (earlier segments' gradients double-counted); PyTorch issue 65537",
          "a block with parameters whose tape was recomputed (block-level or op-level)",
          // Class semantic: every gradient doubled: none of the narrower classes (none is "scaled") explains a factor
          // of two.
          "bitwise-equal", FindingClass::kSemantic, [] { return std::make_unique<GradsAccumulatedTwice>(); }};
}

}  // namespace ckpt::mutants
