// The loss of a chain at its current parameters and input, without tapes: the objective finite differences
// evaluate. The generator is reset to `rng` so every evaluation draws the same dropout masks, and module state
// is left as it was found (BatchNorm's output uses batch statistics either way); an moe block's auxiliary loss is
// part of the objective (each micro-batch's trackers, read after its forward as MicroBatchSums::add does). With
// micro-batches (cases/micro_batches.h) it is the step's loss: the micro-batches' divided losses added in order,
// each micro-batch normalised by its own statistics.
#pragma once
#include <vector>

#include "cases/micro_batches.h"
#include "reference/chain.h"

namespace ckpt::test {

inline double chainLoss(Chain<double>& c, const RngState& rng) {
  c.rng.setState(rng);
  std::vector<Mat<double>> state;
  for (auto* b : c.buffers()) state.push_back(b->value);
  double total = 0;
  for (int m = 0; m < c.microBatches(); ++m) {
    for (auto* b : c.auxLossBuffers()) b->value.setZero();
    Tensor<double> x = c.inputOf(m);
    for (int i = 0; i < c.size(); ++i) {
      BlockEnv env{&c.rng, microStep(c.spec, 0, m), i, true, caseNumerics(c.spec), {}};
      x = blockForward<double>(c.blocks[i], x, nullptr, {}, env);
    }
    const double loss = c.withAuxLoss(c.lossOf(m).forward(x, nullptr));
    total = m == 0 ? loss : total + loss;
  }
  const auto buffers = c.buffers();
  for (size_t k = 0; k < buffers.size(); ++k) buffers[k]->value = state[k];
  return total;
}

}  // namespace ckpt::test
