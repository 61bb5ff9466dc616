// recompute-numerics: the recompute runs GELU with another kernel (the exact erf form instead of the tanh
// approximation the first forward used), as happens when a fused or JIT-compiled kernel is picked for one pass
// and not the other. The two forms differ by up to about 1e-4 relative (far more than rounding), so the tapes
// the backward uses are not the ones the loss was computed through.
// Real world: NVIDIA TransformerEngine PR 327 ("Fix numerics for activation recompute": a missing JIT warm-up of
// the fused bias-GELU kernel made recompute results differ bitwise); JAX issue 8702 ("remat not bitwise
// identical").
#include "harness/mutants/catalog.h"

namespace ckpt::mutants {
namespace {

class RecomputeNumerics final : public EngineVariant {
 public:
  std::string name() const override { return "recompute-numerics"; }
  BlockEnv recomputeEnv(BlockEnv env) const override {
    env.updateState = false;
    env.numerics.erfGelu = true;
    return env;
  }
};

}  // namespace

Mutant recomputeNumerics() {
  return {"recompute-numerics",
          "recompute uses another GELU kernel (erf instead of tanh approximation) than the first forward",
          "NVIDIA/TransformerEngine PR 327 (recompute not bitwise identical: fused GELU kernel); jax-ml/jax#8702",
          "a GELU (gelu mlp or transformer block) recomputed",
          // Class semantic: exact-erf GELU in the recompute where the forward used the tanh approximation: the two
          // differ by about 1e-4 relative (7e11 ULPs of the tensor's scale in double), another function, not a
          // summation order.
          "bitwise-equal", FindingClass::kSemantic, [] { return std::make_unique<RecomputeNumerics>(); }};
}

}  // namespace ckpt::mutants
