// The loss of a chain at its current parameters and input, without tapes: the objective finite differences
// evaluate. The generator is reset to `rng` so every evaluation draws the same dropout masks, and module state
// is left alone (BatchNorm's output uses batch statistics either way). With micro-batches (cases/micro_batches.h)
// it is the step's loss: the micro-batches' divided losses added in order, each micro-batch normalised by its own
// statistics.
#pragma once
#include "cases/micro_batches.h"
#include "reference/chain.h"

namespace ckpt::test {

inline double chainLoss(Chain<double>& c, const RngState& rng) {
  c.rng.setState(rng);
  double total = 0;
  for (int m = 0; m < c.microBatches(); ++m) {
    Tensor<double> x = c.inputOf(m);
    for (int i = 0; i < c.size(); ++i) {
      BlockEnv env{&c.rng, microStep(c.spec, 0, m), i, false, caseNumerics(c.spec), {}};
      x = blockForward<double>(c.blocks[i], x, nullptr, {}, env);
    }
    const double loss = c.lossOf(m).forward(x, nullptr);
    total = m == 0 ? loss : total + loss;
  }
  return total;
}

}  // namespace ckpt::test
