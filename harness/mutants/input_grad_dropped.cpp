// input-grad-dropped: the chain input does not require grad (it is data), and the engine, like PyTorch's
// reentrant checkpoint, decides from that that nothing upstream of the first checkpointed segment needs a
// gradient and never produces dL/dx_0. A user who asked for the input gradient (saliency, adversarial
// examples, a model split across stages) silently gets none.
// Real world: PyTorch issue 7617 ("checkpoint(function, *args) should have the same requires_grad as
// function(*args)": with use_reentrant=True and inputs that do not require grad, no gradient flows back).
#include "harness/mutants/catalog.h"

namespace ckpt::mutants {
namespace {

class InputGradDropped final : public EngineVariant {
 public:
  std::string name() const override { return "input-grad-dropped"; }
  bool reportInputGradient() const override { return false; }
};

}  // namespace

Mutant inputGradDropped() {
  return {"input-grad-dropped",
          "the input gradient is dropped because the input does not require grad (reentrant checkpoint)",
          "PyTorch issue 7617 (reentrant checkpoint: no gradient when the inputs do not require grad)", "every case",
          // Class missing-gradient: the gradient of the chain's input is never written (absent, even where the plain
          // one is zero).
          "bitwise-equal", FindingClass::kMissingGradient, [] { return std::make_unique<InputGradDropped>(); }};
}

}  // namespace ckpt::mutants
