#include "harness/adapters/reference_check.h"

#include <cmath>

namespace ckpt {

FloatConditioning floatConditioning(const CaseSpec& spec) {
  Chain<double> c = buildChain<double>(spec);
  const int L = c.size();
  FloatConditioning out;
  out.around.assign(static_cast<size_t>(L) + 1, 0.0);
  std::vector<BlockTape<double>> tapes(static_cast<size_t>(L));
  Tensor<double> x = Tensor<double>::from(c.input);
  for (int i = 0; i < L; ++i) {
    auto& block = c.blocks[static_cast<size_t>(i)];
    auto& tape = tapes[static_cast<size_t>(i)];
    BlockEnv env{&c.rng, 0, i, false, {}};
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
  c.loss->forward(x, &ctx);
  Tensor<double> g = c.loss->backward(ctx);
  out.around[static_cast<size_t>(L)] = maxAbsOf(Mat<double>(g.map()));
  for (int i = L - 1; i >= 0; --i) {
    g = blockBackward(c.blocks[static_cast<size_t>(i)], std::move(tapes[static_cast<size_t>(i)]), std::move(g));
    out.around[static_cast<size_t>(i)] = maxAbsOf(Mat<double>(g.map()));
  }
  return out;
}

}  // namespace ckpt
