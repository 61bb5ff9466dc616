// Gradient accumulation over micro-batches in the reference trainer (cases/micro_batches.h): the step's gradient
// is the derivative of the step's loss (the micro-batches' losses divided by M and added; finite differences),
// BatchNorm normalises each micro-batch by its own statistics and moves its running statistics once per
// micro-batch, and without per-batch statistics or dropout the accumulated gradient is the whole batch's up to
// rounding. The engine follows the same rules on every backend and policy (verify's properties;
// tests/mutants_test.cpp's micro-batch mutant).
#include <gtest/gtest.h>

#include "cases/case_json.h"
#include "cases/micro_batches.h"
#include "harness/engine/chain_cost.h"
#include "harness/engine/plan.h"
#include "harness/engine/policy.h"
#include "reference/trainer.h"
#include "tests/chain_loss.h"
#include "tests/gradcheck.h"

namespace ckpt {
namespace {

CaseSpec parse(const std::string& text) { return parseCaseText(text, "test"); }

// BatchNorm, dropout and a shared parameter, over 2 micro-batches of 3 sequences each.
const char* kAccumulated = R"({"batch": 6, "seq": 2, "width": 5, "loss": "mse", "seed": 11, "micro_batches": 2,
    "dropout": 0.2, "blocks": [
    {"kind": "mlp", "activation": "tanh"}, {"kind": "residual-bn"}, {"kind": "transformer"},
    {"kind": "mlp", "activation": "tanh", "share": "b0"}]})";

// Finite differences of the step's loss (tests/chain_loss.h: every micro-batch, each with its own statistics and
// its own stretch of the generator) against the accumulated gradient, for every trained parameter and the input.
TEST(MicroBatches, accumulatedGradientIsTheDerivativeOfTheStepLoss) {
  const CaseSpec spec = parse(kAccumulated);
  Chain<double> c = buildChain<double>(spec);
  const RngState rng = c.rng.state();
  Chain<double> stepped = buildChain<double>(spec);
  const StepResult<double> r = referenceStep(stepped, 0);
  EXPECT_DOUBLE_EQ(r.loss, test::chainLoss(c, rng));
  auto objective = [&] {
    syncSharedValues(c);
    return test::chainLoss(c, rng);
  };
  const auto params = c.trainedParams();
  ASSERT_EQ(params.size(), r.grads.size());
  for (size_t k = 0; k < params.size(); ++k) {
    const test::FdResult fd = test::fdCompareChainTensor(params[k]->value.data(), params[k]->value.size(),
                                                         r.grads[k].value.data(), objective);
    EXPECT_EQ(fd.unreliable, 0) << r.grads[k].name;
    EXPECT_LT(fd.maxRel, test::kFdTolerance)
        << r.grads[k].name << " element " << fd.worst << ": analytic " << fd.analytic << ", numeric " << fd.numeric;
  }
  ASSERT_EQ(r.inputGrad.rows(), spec.rows());
  const test::FdResult fd = test::fdCompareChainTensor(c.input.data(), c.input.size(), r.inputGrad.data(), objective);
  EXPECT_EQ(fd.unreliable, 0);
  EXPECT_LT(fd.maxRel, test::kFdTolerance) << "input element " << fd.worst;
}

// One residual-bn block: after a step of 2 micro-batches its running statistics have moved twice, each time
// toward the batch mean of one micro-batch's rows (running = 0.9 running + 0.1 mean), and it counted 2 batches.
TEST(MicroBatches, batchNormMovesOncePerMicroBatch) {
  const CaseSpec spec = parse(R"({"batch": 4, "seq": 1, "width": 3, "loss": "mse", "seed": 5, "micro_batches": 2,
      "blocks": [{"kind": "residual-bn"}]})");
  Chain<double> c = buildChain<double>(spec);
  const Mat<double> w = c.blockParams(0)[0]->value, b = c.blockParams(0)[1]->value;
  Mat<double> expected = Mat<double>::Zero(1, spec.width);
  for (int m = 0; m < 2; ++m) {
    const Mat<double> pre = (c.input.middleRows(2 * m, 2) * w.transpose()).rowwise() + b.row(0);
    expected = 0.9 * expected + 0.1 * pre.colwise().mean();
  }
  const StepResult<double> r = referenceStep(c, 0);
  ASSERT_EQ(r.state.size(), 3u);
  EXPECT_EQ(r.state[0].name, "b0.bn.running_mean");
  EXPECT_LT((r.state[0].value - expected).cwiseAbs().maxCoeff(), 1e-14);
  EXPECT_EQ(r.state[2].value(0, 0), 2.0);
}

// Without batch statistics or dropout, M micro-batches of the mean loss divided by M average the same gradient
// as the whole batch: equal up to rounding, but summed in another order (so an engine must follow the
// micro-batches, not the batch).
TEST(MicroBatches, withoutBatchStatisticsTheAccumulatedGradientIsTheBatchGradient) {
  const std::string blocks =
      R"("blocks": [{"kind": "mlp", "activation": "gelu"}, {"kind": "transformer", "heads": 2}]})";
  const std::string head = R"({"batch": 4, "seq": 3, "width": 6, "loss": "cross_entropy", "seed": 3, )";
  Chain<double> whole = buildChain<double>(parse(head + blocks));
  const StepResult<double> one = referenceStep(whole, 0);
  bool someBitsDiffer = false;
  for (int m : {2, 4}) {
    Chain<double> split = buildChain<double>(parse(head + "\"micro_batches\": " + std::to_string(m) + ", " + blocks));
    const StepResult<double> r = referenceStep(split, 0);
    EXPECT_NEAR(r.loss, one.loss, 1e-14 * std::abs(one.loss));
    ASSERT_EQ(r.grads.size(), one.grads.size());
    for (size_t k = 0; k < r.grads.size(); ++k) {
      const double scale = one.grads[k].value.cwiseAbs().maxCoeff();
      EXPECT_LT((r.grads[k].value - one.grads[k].value).cwiseAbs().maxCoeff(), 1e-13 * scale) << r.grads[k].name;
      someBitsDiffer |= r.grads[k].value != one.grads[k].value;
    }
    EXPECT_LT((r.inputGrad - one.inputGrad).cwiseAbs().maxCoeff(), 1e-13 * one.inputGrad.cwiseAbs().maxCoeff());
  }
  EXPECT_TRUE(someBitsDiffer);
}

// The planner's pass is one micro-batch: its peak is a micro-batch's, and a step measures M passes' evaluations
// and FLOPs.
TEST(MicroBatches, thePlanIsOneMicroBatchAndTheStepIsMPasses) {
  const std::string tail = R"("batch": 4, "seq": 2, "width": 8, "seed": 2, "blocks": [{"kind": "mlp", "repeat": 4}]})";
  const CaseSpec whole = parse("{" + tail), split = parse(R"({"micro_batches": 4, )" + tail);
  const ChainCost cw = caseChainCost(whole), cs = caseChainCost(split);
  EXPECT_EQ(cs.microBatches, 4);
  EXPECT_EQ(cs.inputBytes * 4, cw.inputBytes);
  const Plan pw = planSchedule(storeAllSchedule(cw), cw), ps = planSchedule(storeAllSchedule(cs), cs);
  EXPECT_LT(ps.peakActivationBytes, pw.peakActivationBytes);
  Chain<double> c = buildChain<double>(split);
  const StepResult<double> r = referenceStep(c, 0);
  EXPECT_EQ(r.peakActivationBytes, ps.peakActivationBytes);
  EXPECT_EQ(r.forwardEvals, ps.stepForwardEvals());
  EXPECT_EQ(r.forwardEvals, 16);
  EXPECT_EQ(r.flops, ps.stepFlops());
}

TEST(MicroBatches, casesPrintAndParseBackAndCountersKeyEachMicroBatch) {
  const CaseSpec spec = parse(kAccumulated);
  EXPECT_EQ(spec.microBatches, 2);
  EXPECT_EQ(spec.microRows(), 6);
  EXPECT_EQ(parseCase(caseToJson(spec)), spec);
  EXPECT_EQ(microBatchText(spec), ", 2 micro-batches");
  EXPECT_FALSE(caseToJson(parse(R"({"batch": 2, "width": 4, "blocks": [{"kind": "mlp"}]})")).contains("micro_batches"));
  // Steps of 2 micro-batches key micro-batches 0, 1, 2, 3 ...; one micro-batch keeps the step.
  EXPECT_EQ(microStep(spec, 1, 1), 3);
  CaseSpec one = spec;
  one.microBatches = 1;
  EXPECT_EQ(microStep(one, 5, 0), 5);
}

}  // namespace
}  // namespace ckpt
