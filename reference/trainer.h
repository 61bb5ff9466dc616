// The reference trainer: every block's whole tape stored, backward in reverse. This is the ground truth every
// checkpointing engine is compared with; it is verified against float64 finite differences.
#pragma once
#include <vector>

#include "reference/step.h"

namespace ckpt {

// One step of the reference on `c`, measured. Boundary tensors live only as long as a tape holds them (as in a
// framework whose autograd graph is the only owner of activations).
template <class T>
StepResult<T> referenceStep(Chain<T>& c, int step) {
  ActivationMeter meter;
  T lossValue;
  Tensor<T> dx;
  {
    MeterScope scope(&meter);
    zeroGrads(c);
    const int n = c.size();
    std::vector<BlockTape<T>> tapes(static_cast<size_t>(n));
    meter.phase = Phase::kForward;
    Tensor<T> x = Tensor<T>::from(c.input);
    for (int i = 0; i < n; ++i) {
      BlockEnv env{&c.rng, step, i, true, {}};
      x = blockForward(c.blocks[i], x, &tapes[i], {}, env);
      ++meter.forwardEvals;
    }
    Context<T> lossCtx;
    lossValue = c.loss->forward(x, &lossCtx);
    meter.countFlops(c.loss->meta({x.rows(), x.cols()}).forwardFlops);
    meter.phase = Phase::kBackward;
    Tensor<T> g = c.loss->backward(lossCtx);
    meter.countFlops(c.loss->meta({x.rows(), x.cols()}).backwardFlops);
    x.reset();
    lossCtx = Context<T>();
    for (int i = n - 1; i >= 0; --i) g = blockBackward(c.blocks[i], std::move(tapes[i]), std::move(g));
    dx = std::move(g);
    for (const ShareGroup& sg : shareGroups(c.spec)) reduceSharedGrads(c, sg.users, sg.owner);
  }
  StepResult<T> r = collectStep(c, lossValue, dx);
  dx.reset();
  r.flops = meter.flops;
  r.peakActivationBytes = meter.peak();
  r.forwardEvals = meter.forwardEvals;
  sgdUpdate(c);
  return r;
}

template <class T>
std::vector<StepResult<T>> trainReference(Chain<T>& c, int steps) {
  std::vector<StepResult<T>> rs;
  for (int s = 0; s < steps; ++s) rs.push_back(referenceStep(c, s));
  return rs;
}

// Compiled once, in reference/instantiate.cpp.
extern template StepResult<float> referenceStep<float>(Chain<float>&, int);
extern template StepResult<double> referenceStep<double>(Chain<double>&, int);
extern template std::vector<StepResult<float>> trainReference<float>(Chain<float>&, int);
extern template std::vector<StepResult<double>> trainReference<double>(Chain<double>&, int);

}  // namespace ckpt
