// The reference trainer: every block's whole tape stored, backward in reverse. This is the ground truth every
// checkpointing engine is compared with; it is verified against float64 finite differences.
#pragma once
#include <vector>

#include "reference/step.h"

namespace ckpt {

// One micro-batch's forward, loss and backward (the whole step's without micro-batches), charged to `meter`,
// a token case's stem included; returns dL/dx_0 (none when the stem took it) and sets `loss`.
template <class T>
Tensor<T> referencePass(Chain<T>& c, int step, int m, ActivationMeter& meter, T& loss) {
  const int n = c.size();
  std::vector<BlockTape<T>> tapes(static_cast<size_t>(n));
  meter.phase = Phase::kForward;
  Tensor<T> x = c.inputOf(m);
  for (int i = 0; i < n; ++i) {
    BlockEnv env{&c.rng, microStep(c.spec, step, m), i, true, caseNumerics(c.spec), {}};
    x = blockForward(c.blocks[i], x, &tapes[i], {}, env);
    ++meter.forwardEvals;
  }
  Loss<T>& lossFn = c.lossOf(m);
  const OpMeta lm = lossFn.meta(c.boundaryShape());
  Context<T> lossCtx;
  loss = lossFn.forward(x, &lossCtx);
  meter.countFlops(lm.forwardFlops);
  meter.phase = Phase::kBackward;
  Tensor<T> g = lossFn.backward(lossCtx);
  meter.countFlops(lm.backwardFlops);
  x.reset();
  lossCtx = Context<T>();
  for (int i = n - 1; i >= 0; --i) g = blockBackward(c.blocks[i], std::move(tapes[i]), std::move(g));
  if (c.stemBackward(m, g)) g.reset();
  return g;
}

// What a step hands back: everything observable (the comparisons' input), or only the loss and the measurements,
// for timing a step as a framework's training loop runs it, without copying out every gradient and buffer
// (`validate --timing-case`: the framework's timed step leaves out the writing of its results too).
enum class StepResults { kAll, kLossOnly };

// One step of the reference on `c`, measured: every micro-batch's pass, gradients accumulated
// (cases/micro_batches.h). Boundary tensors live only as long as a tape holds them (as in a framework whose
// autograd graph is the only owner of activations).
template <class T>
StepResult<T> referenceStep(Chain<T>& c, int step, StepResults results = StepResults::kAll) {
  ActivationMeter meter;
  MicroBatchSums<T> sums(c);
  Tensor<T> dx;
  {
    MeterScope scope(&meter);
    for (int m = 0; m < c.microBatches(); ++m) {
      zeroGrads(c);
      T loss = 0;
      dx = referencePass(c, step, m, meter, loss);
      for (const ShareGroup& sg : shareGroups(c.spec)) reduceSharedGrads(c, sg.users, sg.owner);
      reduceTiedGrads(c);
      sums.add(m, loss, dx);
    }
  }
  StepResult<T> r;
  if (results == StepResults::kAll) r = collectStep(c, sums, dx);
  else r.loss = sums.loss();
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
extern template StepResult<float> referenceStep<float>(Chain<float>&, int, StepResults);
extern template StepResult<double> referenceStep<double>(Chain<double>&, int, StepResults);
extern template std::vector<StepResult<float>> trainReference<float>(Chain<float>&, int);
extern template std::vector<StepResult<double>> trainReference<double>(Chain<double>&, int);

}  // namespace ckpt
