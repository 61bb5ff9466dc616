// What one training step yields, for the reference and for every checkpointed engine alike, and the pieces of
// a step that are not about activations (zeroing gradients, SGD, collecting results) — one home for both.
#pragma once
#include <algorithm>
#include <string>
#include <utility>
#include <vector>

#include "reference/chain.h"

namespace ckpt {

template <class T>
struct NamedMat {
  std::string name;
  Mat<T> value;
};

template <class T>
struct StepResult {
  T loss = 0;
  std::vector<NamedMat<T>> grads;  // every parameter gradient, model order
  Mat<T> inputGrad;
  std::vector<NamedMat<T>> state;  // every module buffer after the step
  RngState rng;                    // the generator after the step
  // Measurements of the step.
  FlopCounts flops;
  int64_t peakActivationBytes = 0;
  int64_t forwardEvals = 0;
};

// A pass starts: every gradient and every loss tracker (an moe block's auxiliary loss) at zero.
template <class T>
void zeroGrads(Chain<T>& c) {
  for (auto* p : c.params()) p->grad.setZero();
  for (auto* b : c.auxLossBuffers()) b->value.setZero();
}

// Adds the gradients of parameters several blocks use into block `owner`'s, in the order `users` lists the blocks
// (shareGroups: backward order, owner last): each step adds the running sum into the next block's copy, so the
// last one ends with ((g_first + g_second) + ...) + g_last, which the owner takes when it is not last (an engine
// variant's order). Call after backward, before collectStep.
template <class T>
void reduceSharedGrads(Chain<T>& c, const std::vector<int>& users, int owner) {
  CpuParamSet<T> s{c};
  param_steps::reduceSharedGrads(s, users, owner);
}

// A tied head (cases/lm_case.h): the token embedding's gradient becomes g_head + g_emb, the head's contribution
// first (backward reaches the head before the stem). Without `headContribution` the head's part is lost
// (mutant tied-head-grad-dropped's). Call after the stem's backward, per micro-batch, next to reduceSharedGrads.
template <class T>
void reduceTiedGrads(Chain<T>& c, bool headContribution = true) {
  CpuParamSet<T> s{c};
  param_steps::reduceTiedGrads(s, headContribution);
}

// Gradient accumulation over micro-batches (cases/micro_batches.h) for a CPU chain: after each micro-batch's
// backward and reduceSharedGrads, add() takes its loss, its trained parameters' gradients and its input-gradient
// rows into the step's sums (the first as it is, the next added in micro-batch order); after the last
// micro-batch the parameters take the sums, so collectStep and the update see the step's gradient. The parameters' own
// gradients start from zero in every micro-batch. Without micro-batches only the loss passes through, so the step is
// what it was.
template <class T>
class MicroBatchSums {
 public:
  explicit MicroBatchSums(Chain<T>& c) : c_(c) {}
  bool active() const { return c_.microBatches() > 1; }

  // dx is released into the sums (a host copy) with micro-batches; without, it stays the caller's.
  // The pass's loss is `loss` (the loss function's) plus the chain's auxiliary losses of the pass.
  void add(int m, T loss, Tensor<T>& dx) {
    loss = c_.withAuxLoss(loss);
    loss_ = m == 0 ? loss : loss_ + loss;
    if (!active()) return;
    CpuParamSet<T> s{c_};
    if (m == 0) grads_.assign(c_.trainedParams().size(), Mat<T>());
    param_steps::accumulateGrads(s, grads_, m);
    if (dx.defined()) {
      if (m == 0) inputGrad_ = Mat<T>::Zero(c_.spec.rows(), c_.spec.width);
      inputGrad_.middleRows(microBatchFirstRow(c_.spec, m), c_.spec.microRows()) = dx.map();
    }
    dx.reset();
  }
  // The sums so far of block `block`'s trained parameters become zero (mutant micro-batch-grads-zeroed's).
  void zeroBlock(int block) {
    if (!active() || grads_.empty()) return;
    CpuParamSet<T> s{c_};
    param_steps::zeroBlockSums(s, grads_, block);
  }
  // The step's loss: the micro-batches' losses added in order.
  T loss() const { return loss_; }
  // The step's input gradient with micro-batches (empty without, or when no micro-batch reported one).
  const Mat<T>& inputGrad() const { return inputGrad_; }

 private:
  Chain<T>& c_;
  T loss_ = 0;
  std::vector<Mat<T>> grads_;  // trainedParams() order
  Mat<T> inputGrad_;
};

// Records the step's observable results; call after backward (and reduceSharedGrads), before the update. Only
// trained parameters have a gradient, and only an input that requires one.
template <class T>
StepResult<T> collectStep(Chain<T>& c, const MicroBatchSums<T>& sums, const Tensor<T>& dx) {
  StepResult<T> r;
  r.loss = sums.loss();
  for (auto* p : c.trainedParams()) r.grads.push_back({p->name, p->grad});
  if (dx.defined() && inputGradReported(c.spec)) r.inputGrad = dx.map();
  if (c.microBatches() > 1 && inputGradReported(c.spec)) r.inputGrad = sums.inputGrad();
  for (auto* b : c.buffers()) r.state.push_back({b->name, b->value});
  r.rng = c.rng.state();
  return r;
}

// Plain SGD on the trained parameters, w -= lr * grad; then every sharing block's copy (and a tied head's
// weight) takes its owner's value. `frozenToo` is mutant frozen-params-updated's: an optimiser over every
// parameter that has a .grad (a frozen embedding's too).
template <class T>
void sgdUpdate(Chain<T>& c, bool frozenToo = false) {
  CpuParamSet<T> s{c};
  param_steps::sgd(s, frozenToo);
}

}  // namespace ckpt
