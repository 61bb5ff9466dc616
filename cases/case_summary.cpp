#include "cases/case_summary.h"

#include <sstream>

#include "cases/block_kind.h"
#include "cases/compute_precision.h"
#include "cases/lm_case.h"
#include "cases/micro_batches.h"
#include "cases/param_sharing.h"
#include "cases/stochastic_layers.h"

namespace ckpt {

std::string caseSummary(const CaseSpec& c) {
  std::string kinds;
  for (size_t i = 0; i < c.blocks.size() && i < 6; ++i) {
    const BlockSpec& b = c.blocks[i];
    const BlockKindDef& d = *b.kind;
    kinds += (i ? ", " : "") + std::string(d.name) + d.describe(b) + blockParamText(b);
  }
  if (c.blocks.size() > 6) kinds += ", ...";
  std::ostringstream d;
  d << c.dropout;
  // Cross-entropy is the default and a token case's only loss: only MSE is said.
  const std::string loss = c.loss == LossKind::kCrossEntropy ? "" : std::string(", ") + lossKindName(c.loss) + " loss";
  return std::to_string(c.blocks.size()) + (c.blocks.size() == 1 ? " block (" : " blocks (") + kinds + "), width " +
         std::to_string(c.width) + ", batch " + std::to_string(c.batch) + ", seq " + std::to_string(c.seq) + ", " +
         std::to_string(c.steps) + (c.steps == 1 ? " step, " : " steps, ") + dtypeName(c.dtype) + ", " +
         rngModelName(c.rng) + " rng, dropout " + d.str() + loss + caseParamText(c) + lmText(c) + microBatchText(c) +
         stochasticText(c) + computeText(c);
}

}  // namespace ckpt
