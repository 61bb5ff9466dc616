// rng-left-advanced: the generator is restored for the recompute (so this step's masks are right) but not put
// back afterwards: the live generator is left where the recompute ended, behind or ahead of where the
// store-everything step leaves it. This step's gradients are bitwise right; the generator state after the step
// differs, and so does every mask of the next step.
// Real world: PyTorch PR 14253, which introduced preserve_rng_state because re-running a segment "can result in
// the RNG state advancing more than it would without checkpointing" and juggles the states back.
#include "harness/mutants/catalog.h"

namespace ckpt::mutants {
namespace {

class RngLeftAdvanced final : public EngineVariant {
 public:
  std::string name() const override { return "rng-left-advanced"; }
  void rngAfterRecompute(Rng&, const RngState&) const override {}
};

}  // namespace

Mutant rngLeftAdvanced() {
  return {"rng-left-advanced",
          "generator restored for the recompute but left where the recompute ended: the next step's masks differ",
          "PyTorch PR 14253 (RNG state advanced by re-running a segment; preserve_rng_state's fork and restore)",
          "stateful generator, dropout > 0, a block with dropout recomputed (state after the step, or a second step)",
          // Class rng-desync: the generator after the step is where the recompute's draws left it.
          "bitwise-equal", FindingClass::kRngDesync, [] { return std::make_unique<RngLeftAdvanced>(); }};
}

}  // namespace ckpt::mutants
