// Check 2's comparison (harness/validate/reference_check.h): what each tensor is judged against, and that a fault
// names absolute figures a person can check.
#include <gtest/gtest.h>

#include "cases/case_json.h"
#include "harness/validate/reference_check.h"

namespace ckpt {
namespace {

std::vector<StepResult<double>> oneStep(double loss, double grad, double bias) {
  StepResult<double> r;
  r.loss = loss;
  r.grads.push_back({"b0.fc.weight", Mat<double>::Constant(2, 2, grad)});
  r.grads.push_back({"b0.fc.bias", Mat<double>::Constant(1, 2, bias)});
  r.inputGrad = Mat<double>::Constant(2, 2, grad);
  return {r};
}

TEST(ReferenceCheck, aTensorIsJudgedByItsOwnMagnitude) {
  const auto ref = oneStep(1.0, 0.5, 0.25), got = oneStep(1.0, 0.5, 0.25 * (1 + 3e-7));
  const RefError e = compareWithReference(ref, got, 1e-7);
  EXPECT_EQ(e.tensor, "grad b0.fc.bias");
  EXPECT_NEAR(e.ratio, 3.0, 1e-6);
  EXPECT_NE(e.describe(1e-7).find("relative to its own largest magnitude 0.25"), std::string::npos) << e.describe(1e-7);
}

// A bias feeding BatchNorm: zero in exact arithmetic, rounding noise in both runs. Its own magnitude means
// nothing; the step's largest gradient is the scale.
TEST(ReferenceCheck, aNearZeroTensorIsJudgedByTheGradientsAroundIt) {
  const auto ref = oneStep(1.0, 0.5, 1e-17), got = oneStep(1.0, 0.5, 3e-17);
  const RefError e = compareWithReference(ref, got, 1e-7);
  EXPECT_LT(e.ratio, 1.0);
  const auto wrong = oneStep(1.0, 0.5, 1e-9);  // 1e-9 is 2e-6 of the step's scale 0.5 x 1e-3: too far
  const RefError f = compareWithReference(ref, wrong, 1e-7);
  EXPECT_GT(f.ratio, 1.0);
  EXPECT_NE(f.basis.find("largest gradient of the step"), std::string::npos) << f.basis;
}

// Every gradient exactly zero (a dead ReLU chain): the loss is the scale, never the smallest double (which made
// a bare ratio of 1e307).
TEST(ReferenceCheck, allZeroGradientsAreJudgedByTheLoss) {
  const auto ref = oneStep(2.0, 0.0, 0.0), got = oneStep(2.0, 1e-12, 0.0);
  const RefError e = compareWithReference(ref, got, 1e-7);
  EXPECT_LT(e.ratio, 1.0);
  EXPECT_NE(e.basis.find("relative to the loss 2"), std::string::npos) << e.basis;
  EXPECT_TRUE(gradientsAllZero(ref));
  EXPECT_FALSE(gradientsAllZero(got));
}

TEST(ReferenceCheck, floatConditioningSeesTheGradientsFlowingThroughEachBlock) {
  const CaseSpec spec = parseCaseText(R"({"batch": 2, "seq": 1, "width": 3, "seed": 4,
      "blocks": [{"kind": "mlp", "activation": "tanh"}, {"kind": "residual-bn"}]})");
  const FloatConditioning c = floatConditioning(spec);
  ASSERT_EQ(c.around.size(), 3u);
  for (double a : c.around) EXPECT_GT(a, 0.0);
  EXPECT_EQ(c.degenerateBlock, -1);
}

}  // namespace
}  // namespace ckpt
