// The reference trainer is the ground truth, so it is itself checked: whole random chains against float64
// central finite differences, the += rule across a whole chain, and determinism.
#include <gtest/gtest.h>
#include <rapidcheck/gtest.h>

#include <cstdlib>
#include <filesystem>

#include "cases/generators.h"
#include "harness/dtype_dispatch.h"
#include "reference/trainer.h"
#include "tests/gradcheck.h"

namespace ckpt {
namespace {

// Loss of the chain's current parameters and input, drawing the same dropout masks every time (the generator
// is reset) and without touching module state (BatchNorm's output uses batch statistics either way).
double lossOf(Chain<double>& c, const RngState& rng) {
  c.rng.setState(rng);
  Tensor<double> x = Tensor<double>::from(c.input);
  for (int i = 0; i < c.size(); ++i) {
    BlockEnv env{&c.rng, 0, i, false, {}};
    x = blockForward<double>(c.blocks[i], x, nullptr, {}, env);
  }
  return c.loss->forward(x, nullptr);
}

// Analytic gradients of one step (parameters' and input's), leaving parameters unchanged.
struct Grads {
  std::vector<Mat<double>> params;
  Mat<double> input;
};
Grads analyticGrads(Chain<double>& c, const RngState& rng) {
  c.rng.setState(rng);
  zeroGrads(c);
  std::vector<BlockTape<double>> tapes(c.size());
  Tensor<double> x = Tensor<double>::from(c.input);
  for (int i = 0; i < c.size(); ++i) {
    BlockEnv env{&c.rng, 0, i, false, {}};
    x = blockForward(c.blocks[i], x, &tapes[i], {}, env);
  }
  Context<double> ctx;
  c.loss->forward(x, &ctx);
  Tensor<double> g = c.loss->backward(ctx);
  for (int i = c.size() - 1; i >= 0; --i) g = blockBackward(c.blocks[i], std::move(tapes[i]), std::move(g));
  Grads out;
  for (auto* p : c.params()) out.params.push_back(p->grad);
  out.input = g.map();
  return out;
}

RC_GTEST_PROP(ReferenceChain, gradientsMatchFiniteDifferences, ()) {
  GenLimits lim;
  lim.maxBlocks = 3;
  lim.floatType = false;
  CaseSpec spec = *genCase(lim);
  RC_TAG(spec.blocks.size());
  Chain<double> c = buildChain<double>(spec);
  const RngState rng = c.rng.state();
  const Grads g = analyticGrads(c, rng);
  auto objective = [&] { return lossOf(c, rng); };
  double scale = g.input.cwiseAbs().maxCoeff();
  for (const auto& m : g.params) scale = std::max(scale, m.size() ? m.cwiseAbs().maxCoeff() : 0.0);
  const double floor = std::max(test::kFdFloor, test::kFdChainFloor * scale);
  test::FdResult worst;
  worst.merge(test::fdCompare(c.input.data(), c.input.size(), g.input.data(), objective, test::kFdStep, floor));
  auto params = c.params();
  for (size_t p = 0; p < params.size(); ++p) {
    // A strided sample of each tensor keeps the property fast on wide layers.
    Mat<double>& v = params[p]->value;
    const int64_t stride = std::max<int64_t>(1, v.size() / 12);
    for (int64_t i = 0; i < v.size(); i += stride) worst.merge(test::fdCompare(&v(i), 1, &g.params[p](i), objective, test::kFdStep, floor));
  }
  RC_ASSERT(worst.maxRel <= test::kFdTolerance);
}

TEST(ReferenceChain, parameterGradientsAccumulateAcrossBackwardPasses) {
  CaseSpec spec = parseCaseText(R"({"batch": 2, "seq": 4, "width": 8, "dropout": 0.2,
      "blocks": [{"kind": "mlp"}, {"kind": "residual-bn"}, {"kind": "transformer", "heads": 2}]})");
  Chain<double> c = buildChain<double>(spec);
  const RngState rng = c.rng.state();
  const Grads once = analyticGrads(c, rng);
  // A second pass without zeroing: parameter gradients double (+=), the input gradient does not (=).
  c.rng.setState(rng);
  std::vector<BlockTape<double>> tapes(c.size());
  Tensor<double> x = Tensor<double>::from(c.input);
  for (int i = 0; i < c.size(); ++i) {
    BlockEnv env{&c.rng, 0, i, false, {}};
    x = blockForward(c.blocks[i], x, &tapes[i], {}, env);
  }
  Context<double> ctx;
  c.loss->forward(x, &ctx);
  Tensor<double> g = c.loss->backward(ctx);
  for (int i = c.size() - 1; i >= 0; --i) g = blockBackward(c.blocks[i], std::move(tapes[i]), std::move(g));
  auto params = c.params();
  for (size_t p = 0; p < params.size(); ++p)
    EXPECT_TRUE(params[p]->grad.isApprox(2.0 * once.params[p], 1e-12) || once.params[p].norm() == 0) << params[p]->name;
  EXPECT_TRUE(g.map() == once.input);
}

std::filesystem::path catalogDir() {
  const char* src = std::getenv("CKPT_SOURCE_DIR");
  return std::filesystem::path(src ? src : ".") / "cases" / "catalog";
}

TEST(ReferenceChain, catalogueCasesTrainWithFiniteLossAndAreDeterministic) {
  int seen = 0;
  for (const auto& entry : std::filesystem::directory_iterator(catalogDir())) {
    const CaseSpec spec = loadCase(entry.path().string());
    auto run = [&] {
      return withScalar(spec.dtype, [&](auto t) {
        using T = decltype(t);
        Chain<T> c = buildChain<T>(spec);
        std::vector<double> losses;
        for (auto& r : trainReference(c, 2)) losses.push_back(static_cast<double>(r.loss));
        return losses;
      });
    };
    const auto a = run(), b = run();
    for (double l : a) EXPECT_TRUE(std::isfinite(l)) << spec.name;
    EXPECT_EQ(a, b) << spec.name << ": two runs of the same case differ";
    ++seen;
  }
  EXPECT_GE(seen, 4);
}

}  // namespace
}  // namespace ckpt
