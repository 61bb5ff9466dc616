// segment-boundary-off-by-one: the engine keeps its checkpoints in a list indexed by segment and looks up the
// one a recompute starts from with an off-by-one index, so the first block of a recomputed segment reads the
// previous segment's checkpoint: that block's tape (and everything recomputed after it) comes from the wrong
// segment. The first segment has no predecessor and is recomputed correctly.
// Real world: the segment arithmetic of uniform recompute is a known source of off-by-one bugs (Megatron-LM
// issue 2294 / PR 3562: the last chunk's layer range ran past the last layer); this is its silent form, where
// the wrong index is still a valid one.
#include "harness/mutants/catalog.h"

namespace ckpt::mutants {
namespace {

class SegmentBoundaryOffByOne final : public EngineVariant {
 public:
  std::string name() const override { return "segment-boundary-off-by-one"; }
  int forwardInput(int block, bool recompute, const StepView& v) const override {
    if (!recompute || !v.isCheckpoint(block)) return block;  // only where a recompute starts from a checkpoint
    for (int b = block - 1; b >= 0; --b)
      if (v.isCheckpoint(b)) return b;  // checkpoints[segment - 1] instead of checkpoints[segment]
    return block;
  }
};

}  // namespace

Mutant segmentBoundaryOffByOne() {
  return {"segment-boundary-off-by-one",
          "a recompute starts from the previous segment's checkpoint (checkpoint index off by one)",
          "segment index arithmetic as in Megatron-LM issue 2294 / PR 3562, in its silent form",
          "a recompute of any segment but the first while an earlier checkpoint is held",
          // Class semantic: recomputed blocks fed the wrong input, or a stale or overwritten saved tensor: the
          // backward differentiates another function, and gradients are off by far more than rounding (infinitely
          // many ULPs of a zero scale).
          "bitwise-equal", FindingClass::kSemantic, [] { return std::make_unique<SegmentBoundaryOffByOne>(); }};
}

}  // namespace ckpt::mutants
