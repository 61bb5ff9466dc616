// The mixture-of-experts block (reference/ops/moe.h, cases/kinds/moe.cpp, cases/moe_case.h): its gradient is the
// derivative of its output and its auxiliary loss (finite differences), it routes as documented (ties to the
// lower expert, assignments over capacity dropped, every token's output the gated sum of its experts'), its
// state moves once per training forward and once per step however the block is recomputed, the step's loss
// carries the auxiliary loss, every policy plans moe-tiny exactly, and the generators place moe blocks without
// changing the cases they drew before. The engine-level bugs are mutants (moe-jitter-redrawn,
// moe-aux-loss-recorded-twice; tests/mutants_test.cpp).
#include <gtest/gtest.h>

#include <random>

#include "cases/case_json.h"
#include "cases/generators.h"
#include "cases/moe_case.h"
#include "harness/engine/chain_cost.h"
#include "harness/engine/executor.h"
#include "harness/engine/plan.h"
#include "harness/engine/policy.h"
#include "reference/ops/moe.h"
#include "reference/trainer.h"
#include "tests/chain_loss.h"
#include "tests/gradcheck.h"
#include "tests/test_util.h"

namespace ckpt {
namespace {

Mat<double> randomMat(std::mt19937_64& g, int64_t rows, int64_t cols) {
  std::uniform_real_distribution<double> u(-1, 1);
  Mat<double> m(rows, cols);
  for (int64_t i = 0; i < m.size(); ++i) m.data()[i] = u(g);
  return m;
}

void randomize(Op<double>& op, std::mt19937_64& g) {
  for (auto* p : op.params()) p->value = randomMat(g, p->value.rows(), p->value.cols());
}

Buffer<double>& bufferNamed(Op<double>& op, const std::string& suffix) {
  for (auto* b : op.buffers())
    if (b->name.ends_with(suffix)) return *b;
  throw std::logic_error("no buffer " + suffix);
}

const RngDraw kDraw{77, 3, 0};

// The routing margin of input x: the smallest gap between a token's k-th and (k+1)-th probability. Finite
// differences at step h are only an oracle where no perturbation can reorder the experts.
double routingMargin(Moe<double>& op, const Tensor<double>& x, const OpEnv& env) {
  Context<double> ctx;
  op.forward(std::vector<Tensor<double>>{x}, &ctx, env);
  const auto p = ctx.tensors[1].map();
  double margin = 1;
  for (int64_t t = 0; t < p.rows(); ++t) {
    std::vector<double> row(p.row(t).data(), p.row(t).data() + p.cols());
    std::sort(row.rbegin(), row.rend());
    for (int k = 0; k < op.topK(); ++k)
      margin = std::min(margin, row[static_cast<size_t>(k)] - row[static_cast<size_t>(k) + 1]);
  }
  return margin;
}

// Objective sum(y * R) + the auxiliary loss the forward records (the tracker zeroed first, as each pass does):
// the backward of dL/dy = R must be its gradient, the load-balancing term included.
TEST(Moe, gradientsIncludingTheAuxiliaryLossMatchFiniteDifferences) {
  std::mt19937_64 g(3);
  for (const int topK : {1, 2}) {
    SCOPED_TRACE("top_k " + std::to_string(topK));
    Moe<double> op("moe", 5, 3, topK, 6, 0.75, 0.2, 0.5);
    randomize(op, g);
    auto x = Tensor<double>::from(randomMat(g, 8, 5));
    NodeDraws replay(nullptr, 0, &kDraw, nullptr);
    const OpEnv env{&replay, {}};
    ASSERT_GT(routingMargin(op, x, env), 1e-3) << "a near-tie in routing: finite differences cannot check this point";
    Buffer<double>& aux = bufferNamed(op, ".aux_loss");
    const Mat<double> R = randomMat(g, 8, 5);
    for (auto* p : op.params()) p->grad.setZero();
    Tensor<double> dx;
    {
      Context<double> ctx;
      op.forward(std::vector<Tensor<double>>{x}, &ctx, env);
      std::vector<Tensor<double>> din(1);
      op.backward(ctx, Tensor<double>::from(R), din);
      dx = din[0];
    }
    auto objective = [&] {
      aux.value.setZero();
      const double out = op.forward(std::vector<Tensor<double>>{x}, nullptr, env).map().cwiseProduct(R).sum();
      return out + aux.value(0, 0);
    };
    test::FdResult r = test::fdCompare(x.data(), x.size(), dx.data(), objective);
    for (auto* p : op.params()) {
      const Mat<double> analytic = p->grad;
      r.merge(test::fdCompare(p->value.data(), p->value.size(), analytic.data(), objective));
    }
    EXPECT_LE(r.maxRel, test::kFdTolerance)
        << "element " << r.worst << ": analytic " << r.analytic << ", numeric " << r.numeric;
    EXPECT_EQ(r.unreliable, 0);
    EXPECT_GT(r.checked, 0);
  }
}

// Zero router weights and equal biases give every expert probability 1/E: top-1 sends every token to expert 0,
// whose 2 slots (capacity factor 1, 8 tokens, 4 experts) take tokens 0 and 1; the other tokens get nothing.
TEST(Moe, tiesGoToTheLowerExpertAndAssignmentsOverCapacityAreDropped) {
  std::mt19937_64 g(9);
  Moe<double> op("moe", 3, 4, 1, 4, 1.0, 0.0, 0.01);
  randomize(op, g);
  auto ps = op.params();
  ps[0]->value.setZero();
  ps[1]->value.setConstant(0.5);
  const auto x = Tensor<double>::from(randomMat(g, 8, 3));
  Context<double> ctx;
  const auto y = op.forward(std::vector<Tensor<double>>{x}, &ctx, OpEnv{});
  EXPECT_EQ(moeCapacity(8, 4, 1, 1.0), 2);
  const Mat<double> counts = bufferNamed(op, ".expert_counts").value;
  EXPECT_EQ(counts, (Mat<double>(1, 4) << 2, 0, 0, 0).finished());
  for (int64_t t = 2; t < 8; ++t) EXPECT_EQ(y.map().row(t).cwiseAbs().maxCoeff(), 0.0) << "token " << t;
  EXPECT_GT(y.map().row(0).cwiseAbs().maxCoeff(), 0.0);
  // aux = E * sum_e f_e P_e = 4 * (1 * 1/4): every assignment went to expert 0, whose mean probability is 1/4.
  EXPECT_DOUBLE_EQ(bufferNamed(op, ".aux_loss").value(0, 0), 0.01 * 1.0);
}

// A token's output is the sum over its experts of p * expert(x), so with capacity for everyone and no jitter,
// top-2 of 2 experts gives p0 * e0(x) + p1 * e1(x) = the two top-1 halves.
TEST(Moe, eachTokenGetsTheGatedSumOfItsExperts) {
  std::mt19937_64 g(4);
  Moe<double> op("moe", 4, 2, 2, 5, 4.0, 0.0, 0.0);
  randomize(op, g);
  const auto x = Tensor<double>::from(randomMat(g, 6, 4));
  Context<double> ctx;
  const auto y = op.forward(std::vector<Tensor<double>>{x}, &ctx, OpEnv{});
  const auto p = ctx.tensors[1].map();
  auto ps = op.params();  // router w, b; expert e: fc1 w, b, fc2 w, b
  for (int64_t t = 0; t < 6; ++t) {
    Eigen::RowVectorXd want = Eigen::RowVectorXd::Zero(4);
    for (int e = 0; e < 2; ++e) {
      const auto& w1 = ps[2 + 4 * e]->value;
      const auto& b1 = ps[3 + 4 * e]->value;
      const auto& w2 = ps[4 + 4 * e]->value;
      const auto& b2 = ps[5 + 4 * e]->value;
      Eigen::RowVectorXd h = x.map().row(t) * w1.transpose() + b1;
      for (auto& v : h) v = 0.5 * v * (1 + std::tanh(std::sqrt(2 / std::numbers::pi) * (v + 0.044715 * v * v * v)));
      want += p(t, e) * (h * w2.transpose() + b2);
    }
    EXPECT_LT((y.map().row(t) - want).cwiseAbs().maxCoeff(), 1e-12) << "token " << t;
  }
  EXPECT_EQ(bufferNamed(op, ".expert_counts").value, (Mat<double>(1, 2) << 6, 6).finished());
}

CaseSpec moeCase(double jitter) {
  CaseSpec c = parseCaseText(R"({"name": "m", "batch": 3, "seq": 2, "width": 4, "dtype": "double",
    "dropout": 0.2, "steps": 2, "micro_batches": 1,
    "blocks": [{"kind": "mlp"}, {"kind": "moe", "experts": 3, "top_k": 2, "capacity_factor": 0.5,
                "aux_loss_coef": 0.3}, {"kind": "moe", "experts": 2}]})",
                             "test");
  c.blocks[1].routerJitter = jitter;
  return c;
}

// The step's loss is the loss function's plus every moe block's auxiliary loss, and its gradients are that sum's
// derivatives (the draws replayed); the trackers end the step holding the pass's values.
TEST(Moe, theStepLossCarriesTheAuxiliaryLossAndItsGradient) {
  for (const double jitter : {0.0, 0.1}) {
    SCOPED_TRACE("jitter " + std::to_string(jitter));
    Chain<double> c = buildChain<double>(moeCase(jitter));
    const RngState start = c.rng.state();
    const double objective = test::chainLoss(c, start);
    c.rng.setState(start);
    Chain<double> twin = buildChain<double>(moeCase(jitter));
    const StepResult<double> r = referenceStep(twin, 0);
    EXPECT_EQ(r.loss, objective);
    double aux = 0;
    for (auto* b : twin.auxLossBuffers()) aux += b->value(0, 0);
    EXPECT_GT(aux, 0.0);
    // Gradients: the reference's against the objective's finite differences.
    const auto ps = c.trainedParams();
    for (size_t k = 0; k < ps.size(); ++k) {
      if (ps[k]->name.find(".moe.") == std::string::npos) continue;
      SCOPED_TRACE(ps[k]->name);
      const Mat<double> analytic = r.grads[k].value;
      const auto fd = test::fdCompare(ps[k]->value.data(), ps[k]->value.size(), analytic.data(),
                                      [&] { return test::chainLoss(c, start); });
      EXPECT_LE(fd.maxRel, test::kFdTolerance);
      EXPECT_EQ(fd.unreliable, 0);
    }
  }
}

// With updateState false a recompute leaves the expert counts and the tracker alone, unless BlockEnv::stateOp
// names the moe op (mutant moe-aux-loss-recorded-twice), which then moves them and no other op's state.
TEST(Moe, aRecomputeMovesItsStateOnlyWhenStateOpNamesIt) {
  CaseSpec spec = moeCase(0.0);
  spec.blocks = {blockOf(moeKind()), blockOf(blockKind("residual-bn"))};
  Chain<double> c = buildChain<double>(spec);
  const auto state = [&] {
    std::vector<Mat<double>> s;
    for (auto* b : c.buffers()) s.push_back(b->value);
    return s;
  };
  const auto before = state();
  Tensor<double> x = c.inputOf(0);
  for (int i = 0; i < 2; ++i)
    x = blockForward<double>(c.blocks[i], x, nullptr, {}, BlockEnv{&c.rng, 0, i, false, {}, {}});
  EXPECT_EQ(state(), before);
  x = c.inputOf(0);
  for (int i = 0; i < 2; ++i) {
    BlockEnv env{&c.rng, 0, i, false, {}, {}};
    env.stateOp = "moe";
    x = blockForward<double>(c.blocks[i], x, nullptr, {}, env);
  }
  const auto after = state();
  const auto buffers = c.buffers();
  for (size_t k = 0; k < buffers.size(); ++k) {
    SCOPED_TRACE(buffers[k]->name);
    EXPECT_EQ(after[k] != before[k], buffers[k]->name.find(".moe.") != std::string::npos);
  }
}

// The moe draw is appended after every older one: a seed's cases without an moe block are the cases it drew
// with moe blocks turned off, and about 30% of cases get one (draws from 700 of 1000).
TEST(Moe, theGeneratorsPlaceMoeBlocksWithoutChangingOtherCases) {
  GenLimits with, without;
  without.moe = false;
  const auto genWith = genCase(with), genWithout = genCase(without);
  int moe = 0;
  const int n = 400;
  for (int i = 0; i < n; ++i) {
    const CaseSpec a = genWith(rc::Random(static_cast<uint64_t>(i)), 50).value();
    const CaseSpec b = genWithout(rc::Random(static_cast<uint64_t>(i)), 50).value();
    EXPECT_FALSE(anyMoe(b));
    if (anyMoe(a)) {
      ++moe;
      continue;
    }
    EXPECT_EQ(caseToJson(a).dump(), caseToJson(b).dump()) << "case " << i;
  }
  EXPECT_GT(moe, n * 20 / 100);
  EXPECT_LT(moe, n * 40 / 100);
}

// Every policy plans the moe-tiny catalogue case exactly: peak bytes, evaluations and FLOPs measured == planned.
TEST(Moe, everyDefaultPolicyPlansMoeTinyExactly) {
  CaseSpec spec = loadCase(test::catalogueCase("moe-tiny").string());
  spec.steps = 1;
  const ChainCost cost = caseChainCost(spec);
  for (const std::string& p : defaultPolicies(cost)) {
    SCOPED_TRACE(p);
    const Schedule s = makeSchedule(parsePolicy(p), cost);
    const Plan plan = planSchedule(s, cost);
    Chain<float> chain = buildChain<float>(spec);
    const auto runs = executeSteps(chain, s, 1);
    ASSERT_EQ(runs.size(), 1u);
    EXPECT_EQ(runs[0].peakActivationBytes, plan.peakActivationBytes);
    EXPECT_EQ(runs[0].forwardEvals, plan.stepForwardEvals());
    EXPECT_EQ(runs[0].flops, plan.stepFlops());
  }
}

}  // namespace
}  // namespace ckpt
