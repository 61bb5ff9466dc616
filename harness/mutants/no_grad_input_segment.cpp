// no-grad-input-segment: a recomputed block whose input does not require a gradient (the chain input is data and
// every block below it is frozen) gets no parameter gradients. PyTorch's reentrant checkpoint runs the region
// under no_grad and builds its output's graph only when an input requires grad, so when none does the region's
// parameters silently get no gradient (a warning at most).
// Real world: transformers issues 21381 and 26221 (gradient checkpointing with frozen embeddings or PEFT: no
// gradients unless enable_input_require_grads() is called), PyTorch's "None of the inputs have requires_grad=True"
// warning.
#include "harness/mutants/catalog.h"

namespace ckpt::mutants {
namespace {

class NoGradInputSegment final : public EngineVariant {
 public:
  std::string name() const override { return "no-grad-input-segment"; }
  void afterBackward(int block, bool recomputed, StepView& v) const override {
    if (recomputed && !v.requiresGrad(block)) v.mapParamGrads(block, [](double) { return 0.0; });
  }
};

}  // namespace

Mutant noGradInputSegment() {
  return {"no-grad-input-segment",
          "a recomputed block whose input requires no gradient gets no parameter gradients (reentrant checkpoint)",
          "transformers issues 21381 / 26221 (checkpointing with frozen embeddings: no gradients)",
          "an input without gradient (and frozen blocks below) feeding a recomputed block with parameters",
          // Class missing-gradient: the parameter gradients of a recomputed block whose input needs no gradient are
          // zeroed.
          "bitwise-equal", FindingClass::kMissingGradient, [] { return std::make_unique<NoGradInputSegment>(); }};
}

}  // namespace ckpt::mutants
