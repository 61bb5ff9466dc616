#include "harness/validate/validate_cases.h"

#include <algorithm>

#include "cases/block_kind.h"
#include "cases/generators.h"
#include "cases/lm_case.h"
#include "cases/param_sharing.h"
#include "cases/stochastic_layers.h"

namespace ckpt {

// A small case with every block kind the adapter runs, for a first run that catches a broken adapter or a bad
// option before any random case (whose failure would otherwise be shrunk as if it were a finding).
CaseSpec smokeCase(const GenLimits& lim) {
  CaseSpec c;
  c.name = "smoke";
  c.batch = 2;
  c.seq = 4;
  c.width = 8;
  for (BlockKind k : blockKinds())
    if (lim.allows(k)) c.blocks.push_back(blockOf(k, k->smoke));
  c.dtype = lim.doubleType ? DType::kDouble : DType::kFloat;
  c.rng = lim.statefulRng ? RngModel::kStateful : RngModel::kCounter;
  c.dropout = lim.dropout ? 0.1 : 0.0;
  c.steps = 2;
  c.seed = 3;
  c.lr = 0.05;
  return c;
}

// Simpler variants of a failing case, in the directions cases/generators.h orders its choices (first element
// simplest). The RapidCheck this builds with does not shrink gen::elementOf / gen::element choices (block kind,
// activation, heads, dropout, loss, dtype, generator model), so a shrunk counterexample can still carry, say, a
// transformer block where an mlp block fails the same way; this pass tries those simplifications one at a time,
// the block kinds' own from their records (BlockKindDef::standIns and simpler).
std::vector<CaseSpec> simplerCases(const CaseSpec& c, const GenLimits& lim) {
  std::vector<CaseSpec> out;
  auto with = [&](auto&& change) {
    CaseSpec d = c;
    change(d);
    makeValid(d);  // e.g. seq 1 with batch 1 leaves a residual-bn block a single row: batch 2 then
    if (!(d == c)) out.push_back(d);
  };
  // Every random draw off at once (cases/stochastic_layers.h), then each source alone: dropout, drop-path, RReLU
  // (back to relu, the simplest activation); and bf16 compute back to exact.
  with([](CaseSpec& d) {
    const CaseSpec off = randomnessOff(d);
    const double lower = d.rreluLower, upper = d.rreluUpper;
    d = off;
    if (!anyRrelu(d)) {  // no RReLU: its range means nothing, so it stays as it was
      d.rreluLower = lower;
      d.rreluUpper = upper;
    }
  });
  with([](CaseSpec& d) { d.dropout = 0; });
  with([](CaseSpec& d) {
    for (BlockSpec& b : d.blocks) b.dropPath = 0;
  });
  with([](CaseSpec& d) {
    for (BlockSpec& b : d.blocks)
      if (b.activation == Activation::kRrelu) b.activation = Activation::kRelu;
  });
  with([](CaseSpec& d) { d.compute = Compute::kExact; });
  if (!anyRrelu(c))
    with([](CaseSpec& d) {  // an RReLU range left by a simplification, back to its default (not printed)
      d.rreluLower = CaseSpec().rreluLower;
      d.rreluUpper = CaseSpec().rreluUpper;
    });
  const auto& kinds = blockKinds();
  const auto simplest = std::find_if(kinds.begin(), kinds.end(), [&](BlockKind k) { return lim.allows(k); });
  for (size_t i = 0; i < c.blocks.size(); ++i) {
    with([&](CaseSpec& d) { eraseBlock(d, i); });
    if (c.blocks[i].frozen && c.blocks[i].share < 0) with([&](CaseSpec& d) { d.blocks[i].frozen = false; });
    if (c.blocks[i].share >= 0) with([&](CaseSpec& d) { d.blocks[i].share = -1; });
    // A block of another kind becomes one of the simplest kind's stand-ins. A stand-in (an mlp block) has fewer
    // dropout sites than, say, a transformer block, and the search has already shrunk the dropout probability to
    // the least at which this block shows the finding, so the stand-in runs with at least the first case's 0.1.
    if (simplest != kinds.end() && c.blocks[i].kind != *simplest)
      for (const BlockSetter& set : (*simplest)->standIns)
        with([&](CaseSpec& d) {
          d.blocks[i] = blockOf(*simplest, set);
          if (d.dropout > 0) d.dropout = std::max(d.dropout, 0.1);
        });
    for (const BlockSetter& set : c.blocks[i].kind->simpler) with([&](CaseSpec& d) { set(d.blocks[i]); });
  }
  with([](CaseSpec& d) { d.inputGrad = true; });  // a token case: the embedding trains again
  // A language-model case (cases/lm_case.h): an untied head, then the smallest vocabulary. It stays a token case
  // (finalize keeps what a finding on one shows); its drawn ids follow the new vocabulary.
  if (isLanguageModel(c)) {
    with([](CaseSpec& d) { d.tieEmbeddings = false; });
    if (c.vocab > 2)
      with([](CaseSpec& d) {
        d.vocab = 2;
        d.tokens.clear();
      });
  }
  with([](CaseSpec& d) { d.microBatches = 1; });
  if (c.microBatches > 2)
    with([](CaseSpec& d) { d.microBatches = 2; });  // makeValid turns it off where 2 does not divide
  with([](CaseSpec& d) { d.steps = 1; });
  with([](CaseSpec& d) { d.seq = 1; });
  with([](CaseSpec& d) { d.batch = 2; });
  with([](CaseSpec& d) { d.width = 2; });
  with([](CaseSpec& d) { d.lr = 0.05; });
  with([](CaseSpec& d) { d.loss = LossKind::kCrossEntropy; });
  if (lim.statefulRng) with([](CaseSpec& d) { d.rng = RngModel::kStateful; });
  if (lim.doubleType) with([](CaseSpec& d) { d.dtype = DType::kDouble; });
  with([](CaseSpec& d) { d.seed = 0; });
  std::erase_if(out, [](const CaseSpec& d) { return d.blocks.empty(); });
  return out;
}

}  // namespace ckpt
