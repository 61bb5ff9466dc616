// RapidCheck generators of random cases. Ranges are small on purpose: shrinking then heads toward the smallest
// model (fewer blocks, narrower, one step, dropout off), and the whole suite runs thousands of cases a minute.
// A case prints as the JSON `ckptcheck run --case` accepts.
#pragma once
#include <algorithm>
#include <cmath>
#include <ostream>
#include <rapidcheck.h>

#include "cases/case_json.h"
#include "cases/case_spec.h"
#include "cases/policy_draw.h"

namespace ckpt {

// What a consumer of random cases can run (an adapter's capabilities restrict these).
struct GenLimits {
  int maxBlocks = 40;
  int maxSteps = 3;
  bool mlp = true;
  bool residualBn = true;
  bool transformer = true;
  bool dropout = true;
  bool floatType = true;
  bool doubleType = true;
  bool counterRng = true;
  bool statefulRng = true;
  // Every choice (block kind, activation, heads, dropout, generator model, dtype, loss) also shrinks, toward its
  // first option: mlp, relu, one head, dropout off, stateful, double, cross-entropy. Off, a choice never shrinks
  // (RapidCheck's elementOf); the cases a seed generates differ between the two settings.
  bool shrinkChoices = false;
};

// One of `values`, uniformly; with `shrinks`, shrinking toward values[0] (RapidCheck's elementOf never shrinks).
template <class T>
rc::Gen<T> genChoice(std::vector<T> values, bool shrinks) {
  if (!shrinks) return rc::gen::elementOf(std::move(values));
  const size_t n = values.size();
  // Size 100: every index as likely at any RapidCheck size (inRange scales with size).
  return rc::gen::map(rc::gen::resize(100, rc::gen::inRange<size_t>(0, n)),
                      [values = std::move(values)](size_t i) { return values[i]; });
}

inline rc::Gen<BlockSpec> genBlock(const GenLimits& lim) {
  std::vector<BlockKind> kinds;
  if (lim.mlp) kinds.push_back(BlockKind::kMlp);
  if (lim.residualBn) kinds.push_back(BlockKind::kResidualBn);
  if (lim.transformer) kinds.push_back(BlockKind::kTransformer);
  return rc::gen::build<BlockSpec>(
      rc::gen::set(&BlockSpec::kind, genChoice(kinds, lim.shrinkChoices)),
      rc::gen::set(&BlockSpec::activation,
                   genChoice(std::vector<Activation>{Activation::kRelu, Activation::kGelu, Activation::kTanh},
                             lim.shrinkChoices)),
      rc::gen::set(&BlockSpec::heads, genChoice(std::vector<int>{1, 2}, lim.shrinkChoices)));
}

// Canonicalises fields a block kind ignores, so equal models compare and print equal.
inline BlockSpec canonical(BlockSpec b) {
  if (b.kind != BlockKind::kMlp) b.activation = Activation::kGelu;
  if (b.kind != BlockKind::kTransformer) b.heads = 1;
  return b;
}

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

// Fixes what the drawn fields make invalid, the smallest change each: a head count that does not divide the
// width falls back to one head; a residual-bn block with a single row (batch 1, seq 1) gets batch 2.
inline void makeValid(CaseSpec& c) {
  bool bn = false;
  for (auto& b : c.blocks) {
    b = canonical(b);
    if (b.kind == BlockKind::kTransformer && c.width % b.heads != 0) b.heads = 1;
    bn = bn || b.kind == BlockKind::kResidualBn;
  }
  if (bn && c.rows() < 2) c.batch = 2;
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
                     genPermille()),                           // learning rate
      [dropout = lim.dropout](const auto& t) {
        CaseSpec c;
        const auto& [blocks, batch, seq, width, dropoutDraw, rng, dtype, steps, seed, loss, lrDraw] = t;
        c.name = "random";
        c.blocks = blocks;
        c.batch = batch;
        c.seq = seq;
        c.width = width;
        c.dropout = dropout ? dropoutFrom(dropoutDraw) : 0.0;
        c.rng = rng;
        c.dtype = dtype;
        c.steps = steps;
        c.seed = seed;
        c.loss = loss;
        c.lr = learningRateFrom(lrDraw);
        makeValid(c);
        return c;
      });
}

// A permille with real mass at both ends of the range (15% exactly 0, 15% exactly 1000): the extremes of every
// policy parameter (uniform:k=L, revolve:slots=L, an optimal budget of exactly the least feasible or store-all's
// peak) come up in every few cases, not once in a thousand. Monotone, so it still shrinks toward 0.
inline rc::Gen<int> genPermilleWithEnds() {
  return rc::gen::map(rc::gen::resize(100, rc::gen::inRange(0, 1428)),
                      [](int v) { return std::clamp(v - 214, 0, 1000); });
}

// One case in twenty also plans a long homogeneous chain (100 to 1000 blocks), where the optimal DP works on a
// coarse grid (rounded levels, the least-peak fallback) that short chains never reach. Such a plan takes 0.1-0.5 s,
// so it stays rare enough for verify's throughput.
inline int longLayersFrom(int u) { return u < 950 ? 0 : 100 + (u - 950) * 18; }

// Random parameters for every policy family (cases/policy_draw.h), as fractions of ranges that depend on the chain
// (its length, its smallest feasible and store-all budgets); harness/verify/policy_draw.h turns a draw into policy
// strings for a case. Shrinks toward the smallest parameters: k = 1, slots = 1, the least feasible budget,
// selective's default list, uniform as the block policy composed with selective.
inline rc::Gen<PolicyDraw> genPolicyDraw() {
  // Fixed size: every fraction of the range is as likely at any RapidCheck size (inRange scales with size).
  return rc::gen::resize(
      100, rc::gen::build<PolicyDraw>(rc::gen::set(&PolicyDraw::uniformK, genPermilleWithEnds()),
                                      rc::gen::set(&PolicyDraw::revolveSlots, genPermilleWithEnds()),
                                      rc::gen::set(&PolicyDraw::optimalBudget, genPermilleWithEnds()),
                                      rc::gen::set(&PolicyDraw::selectiveKinds, rc::gen::inRange<uint32_t>(0, 512)),
                                      rc::gen::set(&PolicyDraw::composedWith, rc::gen::inRange(0, 4)),
                                      rc::gen::set(&PolicyDraw::optimalRival, rc::gen::inRange(0, 64)),
                                      rc::gen::set(&PolicyDraw::longLayers, rc::gen::map(genPermille(), longLayersFrom)),
                                      rc::gen::set(&PolicyDraw::longBudget, genPermilleWithEnds())));
}

inline void showValue(const PolicyDraw& d, std::ostream& os) {
  os << "{uniformK: " << d.uniformK << "/1000, revolveSlots: " << d.revolveSlots
     << "/1000, optimalBudget: " << d.optimalBudget << "/1000, selectiveKinds: " << d.selectiveKinds
     << ", composedWith: " << d.composedWith << ", optimalRival: " << d.optimalRival
     << ", longLayers: " << d.longLayers << ", longBudget: " << d.longBudget << "/1000}";
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
