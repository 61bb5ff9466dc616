// rng-not-restored: the recompute runs from wherever the generator happens to be instead of where the block's
// first forward found it, so every dropout mask of the recompute is new and the backward differentiates a
// different sample than the loss was computed on. The generator is still put back afterwards, so its final
// state is right: only the gradients show it.
// Real world: PyTorch torch.utils.checkpoint(..., preserve_rng_state=False); the same helper written by hand in
// openai/guided-diffusion (issue 167) and OLMo-core (PR 828: preserve_rng_state hard-coded to False).
#include "harness/mutants/catalog.h"

namespace ckpt::mutants {
namespace {

class RngNotRestored final : public EngineVariant {
 public:
  std::string name() const override { return "rng-not-restored"; }
  void rngForRecompute(Rng&, const RngState&) const override {}
};

}  // namespace

Mutant rngNotRestored() {
  return {"rng-not-restored",
          "recompute does not restore the generator, so dropout masks differ from the first forward",
          "PyTorch checkpoint(preserve_rng_state=False); openai/guided-diffusion#167; allenai/OLMo-core#828",
          "stateful generator, dropout > 0, a block with dropout recomputed",
          // Class rng-desync: the recompute draws other dropout masks and puts the generator back, so no generator
          // state shows it; with dropout off the runs agree bit for bit (validate's re-run, worthDropoutOffRerun).
          "bitwise-equal", FindingClass::kRngDesync, [] { return std::make_unique<RngNotRestored>(); }};
}

}  // namespace ckpt::mutants
