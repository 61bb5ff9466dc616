// context-before-filled: during a recompute, a random op's saved noise is captured before the op fills it, and
// the recompute stops early (everything the backward needs has been "saved"), so the tape holds an unfilled
// buffer. Here: the dropout mask in a recomputed tape is the zeroed buffer, not the mask. The forward output is
// right; the gradients through that dropout are zero.
// Real world: PyTorch issue 193671 ("Silent wrong gradients: nn.RReLU under non-reentrant checkpointing saves
// uninitialized noise": with early stop the noise tensor is packed before rrelu writes it).
#include "harness/mutants/catalog.h"

namespace ckpt::mutants {
namespace {

class ContextBeforeFilled final : public EngineVariant {
 public:
  std::string name() const override { return "context-before-filled"; }
  void afterForward(int block, bool recompute, StepView& v) const override {
    if (!recompute || !v.hasTape(block)) return;
    for (int node = 0; node < v.tapeNodes(block); ++node)
      if (v.nodeKind(block, node) == "dropout" && v.contextTensors(block, node) > 0)
        v.mapContextTensor(block, node, 0, [](double) { return 0.0; });  // the mask, as allocated
  }
};

}  // namespace

Mutant contextBeforeFilled() {
  return {"context-before-filled",
          "a recomputed random op's saved noise (the dropout mask) is captured before it is filled",
          "PyTorch issue 193671 (RReLU under non-reentrant checkpoint early stop saves uninitialized noise)",
          "dropout > 0 and a block with dropout recomputed with its tape",
          // Class missing-gradient: the recomputed tape keeps the dropout mask as allocated (zeros), so the gradients
          // through that dropout are all zero while the generator stays in sync: missing, not redrawn.
          "bitwise-equal", FindingClass::kMissingGradient, [] { return std::make_unique<ContextBeforeFilled>(); }};
}

}  // namespace ckpt::mutants
