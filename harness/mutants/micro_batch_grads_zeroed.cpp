// micro-batch-grads-zeroed: when a recomputed block's backward runs in a micro-batch after the first, the block's
// gradient buffer is zeroed first, as an engine does that treats a recompute as the start of that block's
// gradient computation and clears its workspace: what the earlier micro-batches accumulated into the block's
// parameters is lost, and the update uses the last micro-batches' gradient alone. A block that is not recomputed
// keeps its sum, so the bug shows only under checkpointing and only with gradient accumulation.
// Real world: per-block gradient workspaces cleared between micro-batches (paiml/entrenar issue 131: a GPU
// gradient workspace zeroed between the micro-batches of an accumulation window).
#include "harness/mutants/catalog.h"

namespace ckpt::mutants {
namespace {

class MicroBatchGradsZeroed final : public EngineVariant {
 public:
  std::string name() const override { return "micro-batch-grads-zeroed"; }
  void afterBackward(int block, bool recomputed, StepView& v) const override {
    if (recomputed && v.microBatch() > 0) v.zeroAccumulatedGrads(block);
  }
};

}  // namespace

Mutant microBatchGradsZeroed() {
  return {"micro-batch-grads-zeroed",
          "a recomputed block's accumulated gradient is zeroed in every micro-batch after the first",
          "gradient workspaces cleared between micro-batches of an accumulation window",
          "micro-batches and a recomputed block",
          // Class semantic: the earlier micro-batches' share of a recomputed block's gradient is lost: what is left
          // is another gradient, not a scaled or a rounded one (the micro-batches' gradients differ).
          "bitwise-equal", FindingClass::kSemantic, [] { return std::make_unique<MicroBatchGradsZeroed>(); }};
}

}  // namespace ckpt::mutants
