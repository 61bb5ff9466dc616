// Numerics: Eigen-free, so that the block runtime (reference/block_runtime.h) and the device ops share it.
#pragma once

namespace ckpt {

// The ambient numerics an op runs under, as a framework's autocast state or its JIT's kernel choice is ambient
// (not a property of the module). Exact is the default. The others exist because a recompute that silently runs
// under another state (autocast not restored: fairscale issue 1199, PyTorch issues 141896 / 159359; a JIT kernel
// not warmed up: TransformerEngine PR 327) is a real bug class; engine variants (harness/mutants/) set them.
struct Numerics {
  bool erfGelu = false;        // GELU by erf instead of the tanh approximation
  bool bf16Matmul = false;     // matmul outputs rounded to bfloat16, as under autocast
  bool divideByCount = false;  // LayerNorm statistics as sum / C instead of sum * (1/C): another kernel's choice,
                               // equal to the default exactly when 1/C is exact (C a power of two)
  // Matrix products take bfloat16-rounded operands and accumulate in T: the case's "compute": "bf16"
  // (cases/compute_precision.h), as autocast runs a Linear. Unlike the switches above it is the case's own
  // numerics, set for every forward and recompute; a recompute without it is mutant bf16-recompute-in-float.
  bool bf16Inputs = false;
  bool operator==(const Numerics&) const = default;
};

}  // namespace ckpt
