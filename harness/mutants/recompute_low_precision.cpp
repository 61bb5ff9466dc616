// recompute-low-precision: the recompute does not re-enter the autocast state the first forward ran under, so
// its matrix products are rounded to bfloat16 while the first forward's were not. Tapes built by the recompute
// carry bf16-rounded activations.
// Real world: Megatron-LM PR 7538 (the recompute ran outside fp8_autocast: "silently runs in BF16 while the
// forward ran in FP8"); PyTorch PR 71169 (checkpoint's recompute used the default autocast dtype, not the
// forward's); TransformerEngine issue 787.
#include "harness/mutants/catalog.h"

namespace ckpt::mutants {
namespace {

class RecomputeLowPrecision final : public EngineVariant {
 public:
  std::string name() const override { return "recompute-low-precision"; }
  BlockEnv recomputeEnv(BlockEnv env) const override {
    env.updateState = false;
    env.numerics.bf16Matmul = true;
    return env;
  }
};

}  // namespace

Mutant recomputeLowPrecision() {
  return {"recompute-low-precision",
          "recompute runs its matrix products in bfloat16 (autocast state of the forward not restored)",
          "Megatron-LM PR 7538 (recompute outside the forward's fp8_autocast); PyTorch PR 71169",
          "a Linear recomputed (block-level, or linear dropped by selective)",
          // Class semantic: products rounded to bfloat16 in the recompute of a float64 model: 8 significand bits,
          // about 4e12 ULPs of the scale; rounding-level is for differences within 64 ULPs, not for a lost precision.
          "bitwise-equal", FindingClass::kSemantic, [] { return std::make_unique<RecomputeLowPrecision>(); }};
}

}  // namespace ckpt::mutants
