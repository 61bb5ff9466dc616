// Drop-path, RReLU and bf16 compute (cases/stochastic_layers.h, cases/compute_precision.h): the ops draw what
// their definitions say (a decision per sample, a slope per element), a step's gradients are the derivatives of
// its loss with them in the chain (finite differences, the draws replayed), bf16 products round their operands
// and accumulate in float, the backward of a bf16 forward differentiates that forward, the planner predicts the
// new nodes exactly, and the fields print, parse and draw as documented. The engine-level bugs are mutants
// (drop-path-redrawn, rrelu-slopes-regenerated, bf16-recompute-in-float; tests/mutants_test.cpp).
#include <gtest/gtest.h>

#include <cmath>
#include <random>

#include "cases/case_json.h"
#include "cases/compute_precision.h"
#include "cases/generators.h"
#include "cases/stochastic_layers.h"
#include "harness/engine/chain_cost.h"
#include "harness/engine/executor.h"
#include "harness/engine/plan.h"
#include "harness/engine/policy.h"
#include "reference/ops/drop_path.h"
#include "reference/ops/linear.h"
#include "reference/ops/rrelu.h"
#include "reference/trainer.h"
#include "tests/chain_loss.h"
#include "tests/gradcheck.h"

namespace ckpt {
namespace {

CaseSpec parse(const std::string& text) { return parseCaseText(text, "test"); }

Mat<double> randomMat(std::mt19937_64& g, int64_t rows, int64_t cols) {
  std::uniform_real_distribution<double> u(-1, 1);
  Mat<double> m(rows, cols);
  for (int64_t i = 0; i < m.size(); ++i) m.data()[i] = u(g);
  return m;
}

// Seq 4, 1000 samples, p 0.3: each sample's rows are all zero or all x / 0.7, and about 30% are zero (the Philox
// stream of a fixed draw: 0.3 +- 4 standard deviations of a binomial over 1000).
TEST(DropPath, dropsWholeSamplesWithProbabilityP) {
  std::mt19937_64 g(5);
  DropPath<double> op(4, 0.3);
  const auto x = Tensor<double>::from(randomMat(g, 4000, 3));
  Rng rng(RngModel::kCounter, 17);
  NodeDraws draws(&rng, 1, nullptr, nullptr);
  const auto y = op.forward(std::vector<Tensor<double>>{x}, nullptr, OpEnv{&draws, {}});
  int dropped = 0;
  for (int64_t s = 0; s < 1000; ++s) {
    const auto ys = y.map().middleRows(s * 4, 4);
    const auto xs = x.map().middleRows(s * 4, 4);
    if (ys.cwiseAbs().maxCoeff() == 0) {
      ++dropped;
      continue;
    }
    EXPECT_EQ(ys, (xs * (1.0 / (1.0 - 0.3))).eval()) << "sample " << s;
  }
  EXPECT_GT(dropped, 300 - 58);
  EXPECT_LT(dropped, 300 + 58);
}

// Slopes in [lower, upper] where x <= 0, 1 elsewhere, spread over the range; a collapsed range is deterministic
// and is RReLU's evaluation slope (what randomnessOff relies on).
TEST(Rrelu, slopesAreUniformInTheRangeWhereTheInputIsNotPositive) {
  std::mt19937_64 g(6);
  const auto x = Tensor<double>::from(randomMat(g, 200, 10));
  Rng rng(RngModel::kStateful, 3);
  NodeDraws draws(&rng, 0, nullptr, nullptr);
  Rrelu<double> op(0.1, 0.3);
  Context<double> ctx;
  const auto y = op.forward(std::vector<Tensor<double>>{x}, &ctx, OpEnv{&draws, {}});
  const auto noise = ctx.tensors.at(0).map();
  double lo = 1, hi = 0, sum = 0;
  int neg = 0;
  for (int64_t i = 0; i < x.size(); ++i) {
    const double xi = x.data()[i], ni = noise.data()[i];
    EXPECT_EQ(y.data()[i], xi * ni);
    if (xi > 0) {
      EXPECT_EQ(ni, 1.0);
      continue;
    }
    ++neg;
    lo = std::min(lo, ni);
    hi = std::max(hi, ni);
    sum += ni;
  }
  ASSERT_GT(neg, 500);
  EXPECT_GE(lo, 0.1);
  EXPECT_LE(hi, 0.3);
  EXPECT_LT(lo, 0.11) << "slopes should spread over the whole range";
  EXPECT_GT(hi, 0.29);
  EXPECT_NEAR(sum / neg, 0.2, 0.01);

  Rrelu<double> fixed(0.2, 0.2);
  const auto y2 = fixed.forward(std::vector<Tensor<double>>{x}, nullptr, OpEnv{&draws, {}});
  for (int64_t i = 0; i < x.size(); ++i) EXPECT_EQ(y2.data()[i], x.data()[i] > 0 ? x.data()[i] : x.data()[i] * 0.2);
}

// A bf16 Linear: each output is the float sum of products of bf16 values, each product exact in float, so it is
// within K float roundings of the exact sum; the unrounded product is farther off than that for some element,
// so the rounding happened. The backward of a context recorded under bf16 uses the rounded operands.
TEST(Bf16Compute, linearRoundsItsOperandsAndItsBackwardFollowsTheForward) {
  std::mt19937_64 g(7);
  const int64_t n = 5, k = 16, o = 6;
  Linear<float> op("fc", k, o);
  op.params()[0]->value = randomMat(g, o, k).cast<float>();
  op.params()[1]->value.setZero();
  const auto x = Tensor<float>::from(randomMat(g, n, k).cast<float>());
  Numerics bf16;
  bf16.bf16Inputs = true;
  Context<float> ctx;
  ctx.numerics = bf16;
  const auto y = op.forward(std::vector<Tensor<float>>{x}, &ctx, OpEnv{nullptr, bf16});
  const Mat<double> xr = bf16Copy<float>(x.map()).cast<double>(),
                    wr = bf16Copy<float>(op.params()[0]->value).cast<double>();
  const Mat<double> exact = xr * wr.transpose();
  const Mat<double> unrounded = x.map().cast<double>() * op.params()[0]->value.cast<double>().transpose();
  double worstUnrounded = 0;
  for (int64_t i = 0; i < n; ++i)
    for (int64_t j = 0; j < o; ++j) {
      const double bound = k * std::ldexp(1.0, -24) * (xr.row(i).cwiseAbs() * wr.row(j).cwiseAbs().transpose())(0);
      EXPECT_LE(std::abs(y.map()(i, j) - exact(i, j)), bound) << i << "," << j;
      worstUnrounded = std::max(worstUnrounded, std::abs(unrounded(i, j) - exact(i, j)) / bound);
    }
  EXPECT_GT(worstUnrounded, 1.0) << "the bf16 rounding changed nothing measurable";
  for (int64_t i = 0; i < xr.size(); ++i) EXPECT_EQ(static_cast<float>(xr.data()[i]), roundToBf16(xr.data()[i]));

  const auto dy = Tensor<float>::from(randomMat(g, n, o).cast<float>());
  std::vector<Tensor<float>> din(1);
  op.backward(ctx, dy, din);
  const Mat<float> expectDx = dy.map() * bf16Copy<float>(op.params()[0]->value);
  EXPECT_EQ(din[0].map(), expectDx);
  Context<float> exactCtx = ctx;
  exactCtx.numerics = Numerics{};
  op.backward(exactCtx, dy, din);
  EXPECT_NE(din[0].map(), expectDx) << "an exact context must not differentiate the bf16 product";
}

const char* kStochastic = R"({"batch": 4, "seq": 2, "width": 6, "seed": 21, "dropout": 0.1, "steps": 1,
    "rrelu_range": [0.05, 0.4], "blocks": [{"kind": "mlp", "activation": "rrelu"},
    {"kind": "transformer", "heads": 2, "drop_path": 0.5}, {"kind": "residual-bn", "drop_path": 0.4},
    {"kind": "mlp", "activation": "rrelu"}]})";

// The step's gradients are the derivatives of its loss with the decisions and slopes of its draws (the chain's
// loss replays the generator from the step's start, so finite differences see the same draws).
TEST(StochasticLayers, gradientsAreDerivativesOfTheStepLoss) {
  const CaseSpec spec = parse(kStochastic);
  Chain<double> c = buildChain<double>(spec);
  const RngState rng = c.rng.state();
  Chain<double> stepped = buildChain<double>(spec);
  const StepResult<double> r = referenceStep(stepped, 0);
  EXPECT_DOUBLE_EQ(r.loss, test::chainLoss(c, rng));
  const auto params = c.trainedParams();
  ASSERT_EQ(params.size(), r.grads.size());
  for (size_t k = 0; k < params.size(); ++k) {
    const test::FdResult fd =
        test::fdCompareChainTensor(params[k]->value.data(), params[k]->value.size(), r.grads[k].value.data(),
                                   [&] { return test::chainLoss(c, rng); });
    EXPECT_LT(fd.maxRel, test::kFdTolerance) << r.grads[k].name << " element " << fd.worst;
  }
}

// The new nodes' bytes, FLOPs and draws are in the plan: planned == measured for block-level and op-level
// policies, bf16 included; and the step is bitwise the reference's.
TEST(StochasticLayers, planPredictsTheNewNodesExactly) {
  for (const char* extra : {"", R"("dtype": "float", "compute": "bf16", )"}) {
    const CaseSpec spec = parse(std::string("{") + extra + (kStochastic + 1));
    const ChainCost cc = caseChainCost(spec);
    for (const char* policy : {"store-all", "uniform:k=2", "revolve:slots=1", "selective", "uniform:k=2+selective"}) {
      auto run = [&](auto tag) {
        using T = decltype(tag);
        Chain<T> c = buildChain<T>(spec);
        const Schedule s = makeSchedule(parsePolicy(policy), cc);
        const Plan p = planSchedule(s, cc);
        const StepResult<T> r = executeSteps(c, s, 1).at(0);
        EXPECT_EQ(r.peakActivationBytes, p.peakActivationBytes) << extra << policy;
        EXPECT_EQ(r.flops, p.stepFlops()) << extra << policy;
      };
      if (spec.dtype == DType::kFloat) run(float{});
      else run(double{});
    }
  }
}

TEST(StochasticLayers, fieldsPrintAndParseBack) {
  const CaseSpec spec = parse(kStochastic);
  EXPECT_EQ(spec.blocks[1].dropPath, 0.5);
  EXPECT_EQ(spec.blocks[0].activation, Activation::kRrelu);
  EXPECT_EQ(spec.rreluLower, 0.05);
  EXPECT_EQ(parseCase(caseToJson(spec)), spec);
  EXPECT_EQ(stochasticText(spec), ", drop-path 0.5, rrelu");
  const CaseSpec bf =
      parse(R"({"batch": 2, "width": 4, "dtype": "float", "compute": "bf16", "blocks": [{"kind": "mlp"}]})");
  EXPECT_TRUE(bf16Compute(bf));
  EXPECT_EQ(parseCase(caseToJson(bf)), bf);
  const auto plain = caseToJson(parse(R"({"batch": 2, "width": 4, "blocks": [{"kind": "residual-bn"}]})"));
  EXPECT_FALSE(plain.contains("compute"));
  EXPECT_FALSE(plain.contains("rrelu_range"));
  EXPECT_FALSE(plain["blocks"][0].contains("drop_path"));
  // drop_path 0 leaves the program as it was: no node, so older cases plan what they planned.
  EXPECT_EQ(caseChainCost(parse(R"({"batch": 2, "width": 4, "blocks": [{"kind": "residual-bn", "drop_path": 0}]})"))
                .programs.at(0)
                .nodes.size(),
            4u);
}

TEST(StochasticLayers, randomnessOffMakesEveryDrawIrrelevantButKeepsThePrecision) {
  CaseSpec spec = parse(kStochastic);
  spec.dtype = DType::kFloat;
  spec.compute = Compute::kBf16;
  const CaseSpec off = randomnessOff(spec);
  EXPECT_EQ(off.dropout, 0);
  for (const BlockSpec& b : off.blocks) EXPECT_EQ(b.dropPath, 0);
  EXPECT_EQ(off.rreluLower, off.rreluUpper);
  EXPECT_DOUBLE_EQ(off.rreluLower, (0.05 + 0.4) / 2);
  EXPECT_EQ(off.compute, Compute::kBf16);
  // Two generator models, two seeds: the same step.
  CaseSpec a = off, b = off;
  b.rng = b.rng == RngModel::kCounter ? RngModel::kStateful : RngModel::kCounter;
  Chain<float> ca = buildChain<float>(a), cb = buildChain<float>(b);
  EXPECT_EQ(referenceStep(ca, 0).loss, referenceStep(cb, 0).loss);
}

// The generators' draws: shares as documented over every permille, rising drop-path with depth, bf16 only with
// float, and each turned off by its limit.
TEST(StochasticLayers, drawsSpreadAsDocumented) {
  int rrelu = 0, dropPath = 0, both = 0;
  for (int d = 0; d <= 1000; ++d) {
    CaseSpec c = parse(R"({"batch": 2, "width": 4, "blocks": [{"kind": "mlp"}, {"kind": "transformer"},
        {"kind": "residual-bn"}]})");
    applyStochasticDraw(c, d, true, true);
    const bool r = c.blocks[0].activation == Activation::kRrelu, p = c.blocks[1].dropPath > 0;
    rrelu += r;
    dropPath += p;
    both += r && p;
    EXPECT_EQ(c.blocks[0].dropPath, 0) << "mlp takes no drop_path";
    if (p) {
      EXPECT_LT(c.blocks[1].dropPath, c.blocks[2].dropPath) << "drop-path rises with depth";
      EXPECT_LT(c.blocks[2].dropPath, 0.61);
    }
    applyStochasticDraw(c, d, false, false);
    EXPECT_FALSE(anyDropPath(c));
  }
  EXPECT_EQ(rrelu, 200 + 251);
  EXPECT_EQ(dropPath, 501);
  EXPECT_EQ(both, 251);
  CaseSpec f;
  f.dtype = DType::kFloat;
  applyComputeDraw(f, 700, true);
  EXPECT_TRUE(bf16Compute(f));
  applyComputeDraw(f, 699, true);
  EXPECT_FALSE(bf16Compute(f));
  CaseSpec d;
  d.dtype = DType::kDouble;
  applyComputeDraw(d, 1000, true);
  EXPECT_FALSE(bf16Compute(d));
}

}  // namespace
}  // namespace ckpt
