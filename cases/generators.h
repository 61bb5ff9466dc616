// RapidCheck generators of random cases. Ranges are small on purpose: shrinking then heads toward the smallest
// model (fewer blocks, narrower, one step, dropout off), and the whole suite runs thousands of cases a minute.
// A case prints as the JSON `ckptcheck run --case` accepts.
#pragma once
#include <ostream>
#include <rapidcheck.h>

#include "cases/case_json.h"
#include "cases/case_spec.h"

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

inline rc::Gen<CaseSpec> genCase(const GenLimits& lim = {}) {
  std::vector<DType> dtypes;
  if (lim.doubleType) dtypes.push_back(DType::kDouble);
  if (lim.floatType) dtypes.push_back(DType::kFloat);
  std::vector<RngModel> rngs;
  if (lim.statefulRng) rngs.push_back(RngModel::kStateful);
  if (lim.counterRng) rngs.push_back(RngModel::kCounter);
  const std::vector<double> dropouts = lim.dropout ? std::vector<double>{0.0, 0.2, 0.5} : std::vector<double>{0.0};
  return rc::gen::map(
      rc::gen::tuple(rc::gen::resize(lim.maxBlocks, rc::gen::nonEmpty(rc::gen::container<std::vector<BlockSpec>>(genBlock(lim)))),
                     rc::gen::inRange<int64_t>(2, 5),   // batch (>= 2: BatchNorm needs two rows)
                     rc::gen::inRange<int64_t>(1, 5),   // seq
                     rc::gen::inRange<int64_t>(1, 5),   // width / 2
                     genChoice(dropouts, lim.shrinkChoices), genChoice(rngs, lim.shrinkChoices),
                     genChoice(dtypes, lim.shrinkChoices), rc::gen::inRange(1, lim.maxSteps + 1),
                     rc::gen::inRange<uint64_t>(0, 1000),
                     genChoice(std::vector<LossKind>{LossKind::kCrossEntropy, LossKind::kMse}, lim.shrinkChoices)),
      [maxBlocks = lim.maxBlocks](const auto& t) {
        CaseSpec c;
        const auto& [blocks, batch, seq, halfWidth, dropout, rng, dtype, steps, seed, loss] = t;
        c.name = "random";
        for (const auto& b : blocks) c.blocks.push_back(canonical(b));
        if (c.blocks.size() > static_cast<size_t>(maxBlocks)) c.blocks.resize(static_cast<size_t>(maxBlocks));
        c.batch = batch;
        c.seq = seq;
        c.width = 2 * halfWidth;
        c.dropout = dropout;
        c.rng = rng;
        c.dtype = dtype;
        c.steps = steps;
        c.seed = seed;
        c.loss = loss;
        c.lr = 0.05;
        return c;
      });
}

// Random parameters for every policy family, as fractions of ranges that depend on the chain (its length, its
// smallest feasible and store-all budgets); harness/verify/policy_draw.h turns a draw into policy strings for a
// case. Shrinks toward the smallest parameters: k = 1, slots = 1, the least feasible budget, selective's default
// list, uniform as the block policy composed with selective.
struct PolicyDraw {
  int uniformK = 0;             // permille of [1, L]
  int revolveSlots = 0;         // permille of [1, L]
  int optimalBudget = 0;        // permille of [smallest feasible, store-all peak]
  uint32_t selectiveKinds = 0;  // bitmask over selectableOpKinds(); 0 = the default (every non-matmul op)
  int composedWith = 0;         // block policy composed with selective: 0 uniform, 1 recursive, 2 revolve, 3 optimal
  int optimalRival = 0;         // which other policy of the case optimal is compared with (property 4), modulo
  bool operator==(const PolicyDraw&) const = default;
};

inline rc::Gen<PolicyDraw> genPolicyDraw() {
  // Fixed size: every fraction of the range is as likely at any RapidCheck size (inRange scales with size).
  return rc::gen::resize(
      100, rc::gen::build<PolicyDraw>(rc::gen::set(&PolicyDraw::uniformK, rc::gen::inRange(0, 1001)),
                                      rc::gen::set(&PolicyDraw::revolveSlots, rc::gen::inRange(0, 1001)),
                                      rc::gen::set(&PolicyDraw::optimalBudget, rc::gen::inRange(0, 1001)),
                                      rc::gen::set(&PolicyDraw::selectiveKinds, rc::gen::inRange<uint32_t>(0, 512)),
                                      rc::gen::set(&PolicyDraw::composedWith, rc::gen::inRange(0, 4)),
                                      rc::gen::set(&PolicyDraw::optimalRival, rc::gen::inRange(0, 64))));
}

inline void showValue(const PolicyDraw& d, std::ostream& os) {
  os << "{uniformK: " << d.uniformK << "/1000, revolveSlots: " << d.revolveSlots
     << "/1000, optimalBudget: " << d.optimalBudget << "/1000, selectiveKinds: " << d.selectiveKinds
     << ", composedWith: " << d.composedWith << ", optimalRival: " << d.optimalRival << "}";
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
