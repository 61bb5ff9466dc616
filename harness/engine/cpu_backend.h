// The CPU backend of the executor (executor.h): a reference Chain<T> on Eigen, its block runtime
// (reference/block.h), its loss and its SGD. Every tensor is a reference Tensor<T> charged to the current
// ActivationMeter; StepView accesses touch host memory directly.
#pragma once
#include <string>
#include <utility>
#include <vector>

#include "harness/engine/engine_variant.h"
#include "reference/step.h"

namespace ckpt {

template <class T>
class CpuBackend {
 public:
  using Scalar = T;
  using Act = Tensor<T>;
  using Tape = BlockTape<T>;

  explicit CpuBackend(Chain<T>& c) : c_(c), sums_(c) {}

  int layers() const { return c_.size(); }
  Rng& rng() { return c_.rng; }
  Act input(int m) { return c_.inputOf(m); }
  void zeroGrads() { ckpt::zeroGrads(c_); }
  Act forward(int i, const Act& x, Tape* tape, const KeepMask& keep, const BlockEnv& env) {
    return blockForward(c_.blocks[at(i)], x, tape, keep, env);
  }
  void recomputeDropped(int i, Tape& tape, const BlockEnv& env) { ckpt::recomputeDropped(c_.blocks[at(i)], tape, env); }
  Act backward(int i, Tape&& tape, Act&& dy) { return blockBackward(c_.blocks[at(i)], std::move(tape), std::move(dy)); }
  // Micro-batch `mb`'s loss forward in the forward phase, its backward in the backward phase; returns dL/dx_L.
  Act loss(const Act& x, ActivationMeter& meter, int mb) {
    Loss<T>& lossFn = c_.lossOf(mb);
    const OpMeta m = lossFn.meta(c_.boundaryShape());
    Context<T> ctx;
    meter.phase = Phase::kForward;
    loss_ = lossFn.forward(x, &ctx);
    meter.countFlops(m.forwardFlops);
    meter.phase = Phase::kBackward;
    Act g = lossFn.backward(ctx);
    meter.countFlops(m.backwardFlops);
    return g;
  }
  // After micro-batch m's backward and shared-gradient sums: its loss, gradients and dx into the step's sums.
  void endMicroBatch(int m, Act& dx) { sums_.add(m, loss_, dx); }
  void zeroAccumulated(int block) { sums_.zeroBlock(block); }
  const CaseSpec& spec() const { return c_.spec; }
  void reduceSharedGrads(const std::vector<int>& users, int owner) { ckpt::reduceSharedGrads(c_, users, owner); }
  // A token case's stem backward after micro-batch m's (true: it took dx); a tied head's gradient sum.
  // The executor's meter is in the backward phase here, where the stem's FLOPs count.
  bool stemBackward(int m, const Act& dx) { return c_.stemBackward(m, dx); }
  void reduceTiedGrads(bool headContribution) { ckpt::reduceTiedGrads(c_, headContribution); }
  StepResult<T> collect(const Act& dx) { return collectStep(c_, sums_, dx); }
  void sgd(bool frozenToo) { sgdUpdate(c_, frozenToo); }

  void copy(Act& dst, const Act& src) { dst.map() = src.map(); }
  void mapInPlace(Act& t, const ElementFn& f) {
    T* d = t.data();
    for (int64_t k = 0; k < t.size(); ++k) d[k] = static_cast<T>(f(static_cast<double>(d[k])));
  }
  std::string nodeKind(int b, int node) const { return c_.blocks.at(at(b)).nodes.at(at(node)).op->kind(); }
  void mapParamGrads(int b, const ElementFn& f) {
    for (auto& node : c_.blocks.at(at(b)).nodes)
      for (auto* p : node.op->params()) p->grad = p->grad.unaryExpr([&](T v) { return static_cast<T>(f(v)); });
  }

 private:
  static size_t at(int i) { return static_cast<size_t>(i); }
  Chain<T>& c_;
  MicroBatchSums<T> sums_;
  T loss_ = 0;
};

}  // namespace ckpt
