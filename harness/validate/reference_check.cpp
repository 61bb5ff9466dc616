#include "harness/validate/reference_check.h"

#include <algorithm>
#include <cmath>

#include "cases/micro_batches.h"

namespace ckpt {

namespace {

// One micro-batch's pass (cases/micro_batches.h; each is normalised by its own statistics) into `out`: the largest
// gradient magnitude around each boundary so far, and the last block whose normalisation is degenerate.
void conditionPass(Chain<double>& c, int m, FloatConditioning& out) {
  const int L = c.size();
  std::vector<BlockTape<double>> tapes(static_cast<size_t>(L));
  Tensor<double> x = c.inputOf(m);
  for (int i = 0; i < L; ++i) {
    auto& block = c.blocks[static_cast<size_t>(i)];
    auto& tape = tapes[static_cast<size_t>(i)];
    BlockEnv env{&c.rng, microStep(c.spec, 0, m), i, false, {}, {}};
    x = blockForward(block, x, &tape, {}, env);
    // A normalisation over values that are all equal (a column of identical rows for BatchNorm, a row of equal
    // features for LayerNorm) outputs exactly its bias; rounding makes it +-1/sqrt(eps) times an ULP instead, on
    // either side of the ReLU that may follow. rstd at its ceiling 1/sqrt(eps) (variance below 1e-12 of eps)
    // marks it. Contexts hold {input, mean, rstd} for both ops.
    for (int n = 0; n < block.size(); ++n) {
      const std::string kind = block.nodes[static_cast<size_t>(n)].op->kind();
      if ((kind != "batchnorm" && kind != "layernorm") || !tape.contexts[static_cast<size_t>(n)]) continue;
      const Tensor<double>& rstd = tape.contexts[static_cast<size_t>(n)]->tensors.at(2);
      const double ceiling = 1.0 / std::sqrt(1e-5);
      for (int64_t k = 0; k < rstd.size(); ++k)
        if (rstd.data()[k] >= ceiling * (1 - 1e-12)) out.degenerateBlock = std::max(out.degenerateBlock, i);
    }
  }
  Context<double> ctx;
  c.lossOf(m).forward(x, &ctx);
  Tensor<double> g = c.lossOf(m).backward(ctx);
  auto keep = [&](int boundary) {
    double& around = out.around[static_cast<size_t>(boundary)];
    around = std::max(around, maxAbsOf(Mat<double>(g.map())));
  };
  keep(L);
  for (int i = L - 1; i >= 0; --i) {
    g = blockBackward(c.blocks[static_cast<size_t>(i)], std::move(tapes[static_cast<size_t>(i)]), std::move(g));
    keep(i);
  }
}

}  // namespace

FloatConditioning floatConditioning(const CaseSpec& spec) {
  Chain<double> c = buildChain<double>(spec);
  FloatConditioning out;
  out.around.assign(static_cast<size_t>(c.size()) + 1, 0.0);
  for (int m = 0; m < c.microBatches(); ++m) conditionPass(c, m, out);
  return out;
}

}  // namespace ckpt
