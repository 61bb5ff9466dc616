// What a consumer of random cases can run (an adapter's capabilities restrict these); cases/generators.h draws
// within them.
#pragma once
#include <algorithm>
#include <vector>

#include "cases/case_spec.h"

namespace ckpt {

struct GenLimits {
  int maxBlocks = 40;
  int maxSteps = 3;
  std::vector<BlockKind> excludedKinds;  // registered kinds random cases must not draw
  bool dropout = true;
  bool floatType = true;
  bool doubleType = true;
  bool counterRng = true;
  bool statefulRng = true;
  // Parameter features (cases/param_sharing.h): frozen blocks, blocks sharing parameters, an input without
  // gradient.
  bool frozen = true;
  bool share = true;
  bool noInputGrad = true;
  // Gradient accumulation over micro-batches (cases/micro_batches.h).
  bool microBatches = true;
  // Language-model cases (cases/lm_case.h): token inputs, an embedding stem, an LM head, tied or not.
  bool tokens = true;
  // Stochastic layers (cases/stochastic_layers.h) and bf16 compute (cases/compute_precision.h).
  bool dropPath = true;
  bool rrelu = true;
  bool bf16 = true;
  // Mixture-of-experts blocks (cases/moe_case.h), placed by a case-level draw.
  bool moe = true;
  // Every choice (block kind, activation, heads, dropout, generator model, dtype, loss) also shrinks, toward its
  // first option: mlp, relu, one head, dropout off, stateful, double, cross-entropy. Off, a choice never shrinks
  // (RapidCheck's elementOf); the cases a seed generates differ between the two settings.
  bool shrinkChoices = false;

  bool allows(BlockKind k) const {
    return std::find(excludedKinds.begin(), excludedKinds.end(), k) == excludedKinds.end();
  }
};

}  // namespace ckpt
