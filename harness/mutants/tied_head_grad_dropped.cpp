// tied-head-grad-dropped: in a micro-batch where block 0 was recomputed, the LM head's contribution to the tied
// token embedding's gradient is lost, and the update uses the embedding's scatter-add alone. It models an engine
// that handles a weight used in two places by a per-use gradient hook: with checkpointing, the recompute of the
// first segment re-runs the embedding lookup and fires the tied weight's hook again, and the engine, which
// expects one reduction per parameter per backward, keeps only the last use's gradient. Without checkpointing
// (or when block 0 is never recomputed) both contributions arrive as one sum and the gradient is right.
// Real world: DeepSpeed issue 988 (ZeRO 2/3 with activation checkpointing: the backward hook fires on each
// gradient of a shared weight instead of once, "Gradient computed twice for this partition").
#include "harness/mutants/catalog.h"

namespace ckpt::mutants {
namespace {

class TiedHeadGradDropped final : public EngineVariant {
 public:
  std::string name() const override { return "tied-head-grad-dropped"; }
  bool tiedHeadGradKept(bool firstBlockRecomputed) const override { return !firstBlockRecomputed; }
};

}  // namespace

Mutant tiedHeadGradDropped() {
  return {"tied-head-grad-dropped", "the LM head's gradient on the tied embedding is lost when block 0 was recomputed",
          "a per-use gradient hook on a tied weight fired again by the recompute (one reduction kept)",
          "a language-model case with a tied head whose first block is recomputed",
          // Class semantic: the token embedding's gradient loses the tied head's share: what is left is another
          // gradient, not a scaled or a rounded one.
          "bitwise-equal", FindingClass::kSemantic, [] { return std::make_unique<TiedHeadGradDropped>(); }};
}

}  // namespace ckpt::mutants
