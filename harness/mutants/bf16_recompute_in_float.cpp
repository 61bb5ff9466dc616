// bf16-recompute-in-float: the first forward ran its matrix products under bf16 autocast but the recompute runs
// outside it, in float, so the recomputed activations (and the backward through them) are not the ones the loss
// was computed from. The reverse of recompute-low-precision: here the case's own compute is bf16.
// Real world: fairscale issue 1199 (checkpoint_wrapper's recompute lost the autocast context); PyTorch issues
// 141896 and 159359 (recompute under another autocast state than the forward).
#include "harness/mutants/catalog.h"

namespace ckpt::mutants {
namespace {

class Bf16RecomputeInFloat final : public EngineVariant {
 public:
  std::string name() const override { return "bf16-recompute-in-float"; }
  BlockEnv recomputeEnv(BlockEnv env) const override {
    env.updateState = false;
    env.numerics.bf16Inputs = false;
    return env;
  }
};

}  // namespace

Mutant bf16RecomputeInFloat() {
  return {"bf16-recompute-in-float", "recompute of a bf16-autocast forward runs its matrix products in float",
          "fairscale issue 1199 (recompute outside the forward's autocast); PyTorch issues 141896, 159359",
          "compute bf16, a block with a Linear recomputed (block-level, or a linear dropped by selective)",
          // Class semantic: a float recompute of a bf16 forward: up to a bf16 ULP (2^-8 relative) apart, far beyond
          // rounding-level's 64 float ULPs.
          "bitwise-equal", FindingClass::kSemantic, [] { return std::make_unique<Bf16RecomputeInFloat>(); }};
}

}  // namespace ckpt::mutants
