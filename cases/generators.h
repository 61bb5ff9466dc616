// RapidCheck generators of random cases. Ranges are small on purpose: shrinking then heads toward the smallest
// model (fewer blocks, narrower, one step, dropout off), and the whole suite runs thousands of cases a minute.
// A case prints as the JSON `ckptcheck run --case` accepts.
#pragma once
#include <algorithm>
#include <cmath>
#include <ostream>
#include <rapidcheck.h>

#include "cases/block_kind.h"
#include "cases/case_json.h"
#include "cases/case_spec.h"
#include "cases/compute_precision.h"
#include "cases/gen_limits.h"
#include "cases/moe_case.h"
#include "cases/gen_tuple.h"
#include "cases/lm_case.h"
#include "cases/micro_batches.h"
#include "cases/param_sharing.h"
#include "cases/policy_draw.h"
#include "cases/stochastic_layers.h"

namespace ckpt {

// One of `values`, uniformly; with `shrinks`, shrinking toward values[0] (RapidCheck's elementOf never shrinks).
template <class T>
rc::Gen<T> genChoice(std::vector<T> values, bool shrinks) {
  if (!shrinks) return rc::gen::elementOf(std::move(values));
  const size_t n = values.size();
  // Size 100: every index as likely at any RapidCheck size (inRange scales with size).
  return rc::gen::map(rc::gen::resize(100, rc::gen::inRange<size_t>(0, n)),
                      [values = std::move(values)](size_t i) { return values[i]; });
}

// A block: its kind among those the limits allow, then every registered kind's fields, each drawn whatever the
// kind (a field the kind ignores is reset by canonical), so a block always takes the same number of draws. The
// leading no-op element stands where rc::gen::build puts its default-constructed object: the draws, and so the
// cases of a seed, stay those of the build<BlockSpec>(kind, activation, heads) this replaced.
inline rc::Gen<BlockSpec> genBlock(const GenLimits& lim) {
  std::vector<BlockKind> kinds;
  for (BlockKind k : blockKinds())
    if (lim.allows(k) && !k->drawnByCase) kinds.push_back(k);
  std::vector<rc::Gen<BlockSetter>> draws;
  draws.push_back(rc::gen::just(BlockSetter([](BlockSpec&) {})));
  draws.push_back(rc::gen::map(genChoice(kinds, lim.shrinkChoices),
                               [](BlockKind k) { return BlockSetter([k](BlockSpec& s) { s.kind = k; }); }));
  for (const BlockKindDef* d : blockKinds())
    for (const BlockField& f : d->fields)
      if (f.draw) draws.push_back(f.draw(lim.shrinkChoices));  // a field without one is drawn case-wide
  return rc::gen::map(dynamicTuple(std::move(draws)), [](const std::vector<BlockSetter>& setters) {
    BlockSpec s;
    for (const BlockSetter& set : setters) set(s);
    return s;
  });
}

// Canonicalises fields a block kind ignores, so equal models compare and print equal.
inline BlockSpec canonical(const BlockSpec& b) { return b.kind->canonical(b); }

// A number in [0, 1000] drawn at a fixed size: every value is as likely at any RapidCheck size (inRange scales
// with size), so the first cases of a run already spread over every range, and it shrinks toward 0. The fields
// below are monotone (or, for lr, centred) maps of such numbers, so shrinking them heads for the simplest model.
inline rc::Gen<int> genPermille() { return rc::gen::resize(100, rc::gen::inRange(0, 1001)); }

// Chain length from a permille: 60% short chains (1 to 6 blocks), 25% of 7 to 20 (at least three segments under
// round(sqrt(L)) checkpointing), 15% of 21 up to maxBlocks (at least five); monotone, so it shrinks toward 1.
inline int chainLength(int u, int maxBlocks) {
  const int a = std::min(6, maxBlocks), b = std::min(20, maxBlocks);
  if (u < 600) return 1 + u * a / 600;
  if (u < 850) return b > a ? a + 1 + (u - 600) * (b - a) / 250 : a;
  return maxBlocks > b ? b + 1 + (u - 850) * (maxBlocks - b) / 151 : b;
}

// Dropout probability from a permille: 30% off; otherwise 0.9 t^2 for t uniform in (0, 1], so small values
// (p < 0.15 in about 29% of all cases) and large ones (p >= 0.5 in about 18%) are both common, and almost none is
// a dyadic fraction whose keep-scale 1/(1-p) is exact. Monotone: it shrinks toward dropout off.
inline double dropoutFrom(int u) {
  if (u < 300) return 0.0;
  const double t = (u - 299) / 701.0;
  return 0.9 * t * t;
}

// Learning rate from a permille: 0.05 for the first fifth (what shrinking reaches), else log-uniform in
// [0.001, 0.2].
inline double learningRateFrom(int u) { return u < 200 ? 0.05 : 1e-3 * std::pow(200.0, (u - 200) / 800.0); }

inline rc::Gen<std::vector<BlockSpec>> genBlocks(const GenLimits& lim) {
  return rc::gen::mapcat(genPermille(), [lim](int u) {
    return rc::gen::container<std::vector<BlockSpec>>(static_cast<size_t>(chainLength(u, lim.maxBlocks)),
                                                      genBlock(lim));
  });
}

// Fixes what the drawn fields make invalid, the smallest change each (BlockKindDef::makeValid): a head count
// that does not divide the width falls back to one head; a residual-bn block with micro-batches of a single row gets
// two rows each; a share or an input without gradient a simplification left inconsistent (fixParamFields);
// micro-batches that no longer divide the batch (fixMicroBatches, first: residual-bn's fix reads the micro-batch rows);
// inline tokens that no longer match the rows (fixLmFields); bf16 compute with a double case (fixCompute).
inline void makeValid(CaseSpec& c) {
  fixMicroBatches(c);
  fixCompute(c);
  fixLmFields(c);
  for (auto& b : c.blocks) {
    const BlockKindDef& d = *b.kind;
    b = d.canonical(b);
    d.makeValid(b, c);
  }
  fixParamFields(c);
}

inline rc::Gen<CaseSpec> genCase(const GenLimits& lim = {}) {
  std::vector<DType> dtypes;
  if (lim.doubleType) dtypes.push_back(DType::kDouble);
  if (lim.floatType) dtypes.push_back(DType::kFloat);
  std::vector<RngModel> rngs;
  if (lim.statefulRng) rngs.push_back(RngModel::kStateful);
  if (lim.counterRng) rngs.push_back(RngModel::kCounter);
  auto fixed = [](auto gen) { return rc::gen::resize(100, std::move(gen)); };
  return rc::gen::map(
      rc::gen::tuple(genBlocks(lim),
                     fixed(rc::gen::inRange<int64_t>(1, 5)),   // batch: 1 (where the blocks allow it) to 4
                     fixed(rc::gen::inRange<int64_t>(1, 5)),   // seq
                     fixed(rc::gen::inRange<int64_t>(2, 11)),  // width: odd and even, powers of two and not
                     genPermille(),                            // dropout
                     genChoice(rngs, lim.shrinkChoices), genChoice(dtypes, lim.shrinkChoices),
                     fixed(rc::gen::inRange(1, lim.maxSteps + 1)), fixed(rc::gen::inRange<uint64_t>(0, 1000)),
                     genChoice(std::vector<LossKind>{LossKind::kCrossEntropy, LossKind::kMse}, lim.shrinkChoices),
                     genPermille(),  // learning rate
                     // Last, so the draws before them, and the rest of the cases a seed drew before they
                     // existed, stay as they were: frozen prefix, sharing, input without gradient, micro-batches.
                     genPermille(), genPermille(), genPermille(), genPermille(),
                     genPermille(),   // language-model cases
                     genPermille(),   // drop-path and RReLU
                     genPermille(),   // bf16 compute
                     genPermille()),  // moe blocks
      [lim](const auto& t) {
        CaseSpec c;
        const auto& [blocks, batch, seq, width, dropoutDraw, rng, dtype, steps, seed, loss, lrDraw, frozenDraw,
                     shareDraw, inputGradDraw, microDraw, lmDraw, stochasticDraw, computeDraw, moeDraw] = t;
        c.name = "random";
        c.blocks = blocks;
        c.batch = batch;
        c.seq = seq;
        c.width = width;
        c.dropout = lim.dropout ? dropoutFrom(dropoutDraw) : 0.0;
        c.rng = rng;
        c.dtype = dtype;
        c.steps = steps;
        c.seed = seed;
        c.loss = loss;
        c.lr = learningRateFrom(lrDraw);
        applyMicroBatchDraw(c, microDraw, lim.microBatches);
        applyLmDraw(c, lmDraw, lim.tokens);
        applyMoeDraw(c, moeDraw, lim.moe && lim.allows(moeKind()));
        applyStochasticDraw(c, stochasticDraw, lim.dropPath, lim.rrelu);
        applyComputeDraw(c, computeDraw, lim.bf16);
        makeValid(c);
        applyParamDraws(c, frozenDraw, shareDraw, inputGradDraw, lim.frozen, lim.share, lim.noInputGrad);
        return c;
      });
}

inline void showValue(const PolicyDraw& d, std::ostream& os) {
  os << "{uniformK: " << d.uniformK << "/1000, revolveSlots: " << d.revolveSlots
     << "/1000, optimalBudget: " << d.optimalBudget << "/1000, selectiveKinds: " << d.selectiveKinds
     << ", composedWith: " << d.composedWith << ", optimalRival: " << d.optimalRival << ", longLayers: " << d.longLayers
     << ", longBudget: " << d.longBudget << "/1000}";
}

inline void showValue(const CaseSpec& c, std::ostream& os) { os << caseToJson(c).dump(); }
inline std::ostream& operator<<(std::ostream& os, const CaseSpec& c) { return os << caseToJson(c).dump(); }

}  // namespace ckpt

namespace rc {
template <>
struct Arbitrary<ckpt::CaseSpec> {
  static Gen<ckpt::CaseSpec> arbitrary() { return ckpt::genCase(); }
};
}  // namespace rc
