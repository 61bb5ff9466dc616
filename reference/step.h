// What one training step yields, for the reference and for every checkpointed engine alike, and the pieces of
// a step that are not about activations (zeroing gradients, SGD, collecting results) — one home for both.
#pragma once
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

template <class T>
void zeroGrads(Chain<T>& c) {
  for (auto* p : c.params()) p->grad.setZero();
}

// Records the step's observable results; call after backward, before the update.
template <class T>
StepResult<T> collectStep(Chain<T>& c, T loss, const Tensor<T>& dx) {
  StepResult<T> r;
  r.loss = loss;
  for (auto* p : c.params()) r.grads.push_back({p->name, p->grad});
  if (dx.defined()) r.inputGrad = dx.map();
  for (auto* b : c.buffers()) r.state.push_back({b->name, b->value});
  r.rng = c.rng.state();
  return r;
}

// Plain SGD: w -= lr * grad.
template <class T>
void sgdUpdate(Chain<T>& c) {
  const T lr = static_cast<T>(c.spec.lr);
  for (auto* p : c.params()) p->value -= lr * p->grad;
}

}  // namespace ckpt
