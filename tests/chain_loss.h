// The loss of a chain at its current parameters and input, without tapes: the objective finite differences
// evaluate. The generator is reset to `rng` so every evaluation draws the same dropout masks, and module state
// is left alone (BatchNorm's output uses batch statistics either way).
#pragma once
#include "reference/chain.h"

namespace ckpt::test {

inline double chainLoss(Chain<double>& c, const RngState& rng) {
  c.rng.setState(rng);
  Tensor<double> x = Tensor<double>::from(c.input);
  for (int i = 0; i < c.size(); ++i) {
    BlockEnv env{&c.rng, 0, i, false, {}};
    x = blockForward<double>(c.blocks[i], x, nullptr, {}, env);
  }
  return c.loss->forward(x, nullptr);
}

}  // namespace ckpt::test
