// Frozen blocks, shared parameters and an input without gradient in the reference trainer (cases/param_sharing.h):
// a shared parameter's gradient is the derivative of the loss with respect to the tied weight (finite
// differences moving every copy together), summed in backward order; frozen parameters neither report a
// gradient nor move; an input without gradient reports none. The engine follows the same rules on every backend
// (verify's properties, tests/mutants_test.cpp's new mutants).
#include <gtest/gtest.h>

#include <cstring>

#include "cases/case_json.h"
#include "cases/param_sharing.h"
#include "reference/trainer.h"
#include "tests/chain_loss.h"
#include "tests/gradcheck.h"

namespace ckpt {
namespace {

CaseSpec parse(const std::string& text) { return parseCaseText(text, "test"); }

// Three tanh mlp blocks using b0's parameters, a transformer block between them of its own.
const char* kShared = R"({"batch": 2, "seq": 2, "width": 6, "loss": "mse", "seed": 7, "blocks": [
    {"kind": "mlp", "activation": "tanh"}, {"kind": "transformer", "heads": 2},
    {"kind": "mlp", "activation": "tanh", "share": "b0"}, {"kind": "mlp", "activation": "tanh", "share": "b0"}]})";

bool sameBits(const Mat<double>& a, const Mat<double>& b) {
  return a.rows() == b.rows() && a.cols() == b.cols() &&
         std::memcmp(a.data(), b.data(), sizeof(double) * static_cast<size_t>(a.size())) == 0;
}

// The loss at the chain's current parameters, sharing blocks' copies first set to their owner's values.
double tiedLoss(Chain<double>& c, const RngState& rng) {
  syncSharedValues(c);
  return test::chainLoss(c, rng);
}

TEST(ParamSharing, sharedGradientIsTheDerivativeOfTheTiedWeight) {
  const CaseSpec spec = parse(kShared);
  Chain<double> c = buildChain<double>(spec);
  const RngState rng = c.rng.state();
  Chain<double> stepped = buildChain<double>(spec);
  const StepResult<double> r = referenceStep(stepped, 0);
  // Only owners report: b0's two parameters and the transformer's twelve.
  ASSERT_EQ(r.grads.size(), 14u);
  for (const auto& g : r.grads) EXPECT_TRUE(g.name.rfind("b2.", 0) != 0 && g.name.rfind("b3.", 0) != 0) << g.name;
  auto objective = [&] { return tiedLoss(c, rng); };
  for (size_t k = 0; k < 2; ++k) {
    Mat<double>& v = c.blockParams(0)[k]->value;
    const Mat<double>& g = r.grads[k].value;
    ASSERT_EQ(r.grads[k].name, c.blockParams(0)[k]->name);
    const test::FdResult fd = test::fdCompareChainTensor(v.data(), v.size(), g.data(), objective);
    EXPECT_EQ(fd.unreliable, 0);
    EXPECT_LT(fd.maxRel, test::kFdTolerance)
        << r.grads[k].name << " element " << fd.worst << ": analytic " << fd.analytic << ", numeric " << fd.numeric;
  }
}

TEST(ParamSharing, sharedGradientAddsTheUsesInBackwardOrder) {
  const CaseSpec spec = parse(kShared);
  // Each use's contribution alone: the same step with the copies' gradients left unreduced.
  Chain<double> c = buildChain<double>(spec);
  zeroGrads(c);
  std::vector<BlockTape<double>> tapes(static_cast<size_t>(c.size()));
  Tensor<double> x = Tensor<double>::from(c.input);
  for (int i = 0; i < c.size(); ++i) {
    BlockEnv env{&c.rng, 0, i, true, {}, {}};
    x = blockForward(c.blocks[i], x, &tapes[static_cast<size_t>(i)], {}, env);
  }
  Context<double> ctx;
  c.loss->forward(x, &ctx);
  x.reset();
  Tensor<double> g = c.loss->backward(ctx);
  for (int i = c.size() - 1; i >= 0; --i)
    g = blockBackward(c.blocks[i], std::move(tapes[static_cast<size_t>(i)]), std::move(g));
  const Mat<double> g3 = c.blockParams(3)[0]->grad, g2 = c.blockParams(2)[0]->grad, g0 = c.blockParams(0)[0]->grad;
  const Mat<double> backward = (g3 + g2) + g0, forward = (g0 + g2) + g3;

  Chain<double> ref = buildChain<double>(spec);
  const StepResult<double> r = referenceStep(ref, 0);
  EXPECT_TRUE(sameBits(r.grads[0].value, backward));
  // The order is visible: summed the other way round, some element differs in its last bits (pinned case).
  EXPECT_FALSE(sameBits(forward, backward));
}

TEST(ParamSharing, frozenBlocksNeitherReportNorMove) {
  const CaseSpec spec = parse(R"({"batch": 2, "width": 5, "lr": 0.1, "steps": 2, "blocks": [
      {"kind": "mlp", "frozen": true}, {"kind": "residual-bn", "frozen": true}, {"kind": "mlp"}]})");
  Chain<double> c = buildChain<double>(spec);
  std::vector<Mat<double>> before;
  for (auto* p : c.params()) before.push_back(p->value);
  const auto rs = trainReference(c, 2);
  for (const auto& r : rs) {
    ASSERT_EQ(r.grads.size(), 2u);  // b2.fc.weight, b2.fc.bias
    EXPECT_EQ(r.grads[0].name, "b2.fc.weight");
    EXPECT_GT(r.inputGrad.cwiseAbs().maxCoeff(), 0.0);  // the input gradient still flows through frozen blocks
    EXPECT_EQ(r.state.size(), 3u);                      // and BatchNorm statistics still move (training mode)
  }
  const auto ps = c.params();
  for (size_t k = 0; k < ps.size(); ++k) {
    const bool trained = ps[k]->name.rfind("b2.", 0) == 0;
    EXPECT_EQ(sameBits(ps[k]->value, before[k]), !trained) << ps[k]->name;
  }
}

TEST(ParamSharing, anInputWithoutGradientReportsNone) {
  CaseSpec spec = parse(R"({"batch": 2, "width": 4, "input_grad": false, "blocks": [
      {"kind": "mlp", "frozen": true}, {"kind": "mlp"}]})");
  EXPECT_FALSE(boundaryRequiresGrad(spec, 0));
  EXPECT_FALSE(boundaryRequiresGrad(spec, 1));
  EXPECT_TRUE(boundaryRequiresGrad(spec, 2));
  Chain<double> c = buildChain<double>(spec);
  const StepResult<double> r = referenceStep(c, 0);
  EXPECT_EQ(r.inputGrad.size(), 0);
  EXPECT_EQ(r.grads.size(), 2u);
  spec.inputGrad = true;
  EXPECT_TRUE(boundaryRequiresGrad(spec, 0));
}

TEST(ParamSharing, casesPrintAndParseBack) {
  const CaseSpec a = parse(R"({"batch": 2, "width": 4, "input_grad": false, "blocks": [
      {"kind": "mlp", "frozen": true}, {"kind": "mlp", "share": "b0", "repeat": 2}, {"kind": "mlp"}]})");
  EXPECT_TRUE(a.blocks[1].frozen);  // a sharing block is frozen with its owner
  EXPECT_EQ(a.blocks[2].share, 0);
  const CaseSpec b = parseCase(caseToJson(a));
  EXPECT_EQ(a, b);
  EXPECT_EQ(caseToJson(a)["blocks"][1]["share"], "b0");
  EXPECT_EQ(caseToJson(a)["input_grad"], false);
  const auto groups = shareGroups(a);
  ASSERT_EQ(groups.size(), 1u);
  EXPECT_EQ(groups[0].users, (std::vector<int>{2, 1, 0}));
}

}  // namespace
}  // namespace ckpt
