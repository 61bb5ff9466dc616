// segment-input-fed: while recomputing a segment of several blocks, every block is fed the segment's input (the
// checkpoint the recompute started from) instead of its predecessor's output, so every tape after the first
// block of the segment is built from the wrong activation.
// Real world: Megatron-LM PR 290 ("fix bug in uniform activation recompute": with --recompute-num-layers > 1 the
// original hidden states were passed to all layers from start to end instead of the updated activations).
#include "harness/mutants/catalog.h"

namespace ckpt::mutants {
namespace {

class SegmentInputFed final : public EngineVariant {
 public:
  std::string name() const override { return "segment-input-fed"; }
  int forwardInput(int block, bool recompute, const StepView& v) const override {
    if (!recompute) return block;
    int b = block;
    while (b > 0 && !v.isCheckpoint(b)) --b;  // the checkpoint this recompute started from
    return v.isCheckpoint(b) ? b : block;
  }
};

}  // namespace

Mutant segmentInputFed() {
  return {"segment-input-fed", "every recomputed block is fed the segment's input instead of its predecessor's output",
          "Megatron-LM PR 290 (uniform recompute passed the original hidden states to every layer of a chunk)",
          "a recomputed segment of two or more blocks",
          // Class semantic: recomputed blocks fed the wrong input, or a stale or overwritten saved tensor: the
          // backward differentiates another function, and gradients are off by far more than rounding (infinitely
          // many ULPs of a zero scale).
          "bitwise-equal", FindingClass::kSemantic, [] { return std::make_unique<SegmentInputFed>(); }};
}

}  // namespace ckpt::mutants
