// DeviceChain (device_chain.h) on an executor X: the device model's blocks, loss, parameters, buffers, input and
// generator, and the block runtime (reference/block_runtime.h, under dblock.h's DeviceRuntime) over them; for a
// token case (cases/lm_case.h) its stem (dops/token_stem.h) and LM head (dops/lm_head.h), with the tied head's
// gradient sum and value copy. Instantiated on HostExec by harness/engine/device_steps.cpp (g++) and on CudaExec
// by gpu_trainer.cu (nvcc); the schedule is interpreted by harness/engine/executor.h for both, with the CPU
// engine's hooks.
#pragma once
#include <algorithm>
#include <chrono>
#include <memory>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "cases/micro_batches.h"
#include "cases/param_sharing.h"
#include "device/dblock.h"
#include "device/device_chain.h"
#include "device/dops/token_stem.h"
#include "reference/aux_loss.h"
#include "reference/param_steps.h"

namespace ckpt::gpu {

template <class T, class X>
class ExecChain : public DeviceChain<T> {
 public:
  ExecChain(X& x, const DeviceModel<T>& m)
      : x_(&x),
        spec_(m.spec),
        lr_(static_cast<T>(m.spec.lr)),
        rng_(m.rngModel, m.rng.seed),
        rows_(m.spec.microRows()),
        cols_(m.spec.width),
        reportsInputGrad_(m.reportsInputGrad),
        lossSum_(DTensor<T>::untracked(x.pool(), 1, 1)),
        passLoss_(DTensor<T>::untracked(x.pool(), 1, 1)) {
    rng_.setState(m.rng);
    if (m.tokens) {
      stem_ = std::make_unique<DTokenStem<T, X>>(x, m.stem);
      head_ = std::make_unique<DLmHead<T>>(makeLmHead(x, m.head));
    }
    for (const auto& bd : m.blocks) {
      DBlock<T, X> b;
      b.kind = bd.kind;
      for (const auto& nd : bd.nodes)
        b.nodes.push_back(DNode<T, X>{nd.name, makeDeviceOp<T, X>(x, nd), nd.node.inputs, nd.forwardFlops,
                                      nd.backwardFlops, nd.node.op});
      blocks_.push_back(std::move(b));
    }
    for (const auto& l : m.losses) losses_.push_back(std::make_unique<DLoss<T, X>>(x, l, rows_, cols_, head_.get()));
    for (const auto& l : m.losses) lossFlops_.push_back({l.forwardFlops, l.backwardFlops});
    if (!stem_) input_ = uploadMatrix(x, m.input);
    params_ = stemParams();
    for (auto& b : blocks_)
      for (auto& n : b.nodes) {
        for (auto* p : n.op->params()) params_.push_back(p);
        for (auto* s : n.op->buffers()) buffers_.push_back(s);
      }
    for (auto* b : buffers_)
      if (isAuxLossBuffer(b->name)) auxLoss_.push_back(b);
    for (auto* p : headParams()) params_.push_back(p);
    // Allocated once, so a step hands the pool back what it took (deviceSteps checks).
    if (spec_.microBatches > 1)
      for (auto* p : trainedParams()) sums_.push_back(DTensor<T>::untracked(x.pool(), p->grad.rows(), p->grad.cols()));
  }

  int layers() const override { return static_cast<int>(blocks_.size()); }
  Rng& rng() override { return rng_; }
  DTensor<T> input(int m) override {
    if (stem_) return stem_->forward(microBatchFirstRow(spec_, m), rows_);
    auto c = DTensor<T>::empty(x_->pool(), rows_, cols_);
    x_->copy(c.data(), input_.data() + microBatchFirstRow(spec_, m) * cols_, c.size());
    return c;
  }
  // reference/step.h's zeroGrads: a pass starts with every gradient and every loss tracker at zero.
  void zeroGrads() override {
    for (auto* p : params_) x_->launch(p->grad.size(), Fill<T>{p->grad.data(), T(0)});
    for (auto* b : auxLoss_) x_->launch(b->value.size(), Fill<T>{b->value.data(), T(0)});
  }
  DTensor<T> forward(int block, const DTensor<T>& x, DBlockTape<T>* tape, const KeepMask& keep,
                     const BlockEnv& env) override {
    DeviceRuntime<T, X> rt{x_};
    return blockForward(rt, blocks_.at(at(block)), x, tape, keep, env);
  }
  void recomputeDropped(int block, DBlockTape<T>& tape, const BlockEnv& env) override {
    DeviceRuntime<T, X> rt{x_};
    ckpt::recomputeDropped(rt, blocks_.at(at(block)), tape, env);
  }
  DTensor<T> backward(int block, DBlockTape<T>&& tape, DTensor<T>&& dy) override {
    DeviceRuntime<T, X> rt{x_};
    return blockBackward(rt, blocks_.at(at(block)), std::move(tape), std::move(dy));
  }
  DTensor<T> loss(const DTensor<T>& x, ActivationMeter& meter, int m) override {
    DLoss<T, X>& lossFn = *losses_.at(at(m));
    DContext<T> ctx;
    meter.phase = Phase::kForward;
    lossFn.forward(x, &ctx);
    meter.countFlops(lossFlops_.at(at(m)).first);
    meter.phase = Phase::kBackward;
    DTensor<T> g = lossFn.backward(ctx);
    meter.countFlops(lossFlops_.at(at(m)).second);
    return g;
  }
  void endMicroBatch(int m, DTensor<T>& dx) override {
    // The pass's loss: the loss function's value plus each loss tracker, model order (reference/chain.h's
    // withAuxLoss), then added into the step's.
    const T* loss = losses_.at(at(m))->value().data();
    if (!auxLoss_.empty()) {
      x_->launch(1, Copy<T>{passLoss_.data(), loss});
      for (auto* b : auxLoss_) x_->launch(1, AccumulateInto<T>{passLoss_.data(), b->value.data()});
      loss = passLoss_.data();
    }
    if (m == 0) x_->launch(1, Copy<T>{lossSum_.data(), loss});
    else x_->launch(1, AccumulateInto<T>{lossSum_.data(), loss});
    if (spec_.microBatches == 1) return;
    ParamSet s{*this};
    param_steps::accumulateGrads(s, sums_, m);
    if (dx.defined()) {
      if (m == 0)
        inputGrad_ =
            HostMatrix<T>{"input", spec_.rows(), cols_, std::vector<T>(static_cast<size_t>(spec_.rows() * cols_))};
      x_->download(inputGrad_.data.data() + microBatchFirstRow(spec_, m) * cols_, dx.data(), dx.size());
    }
    dx.reset();
  }
  void zeroAccumulated(int block) override {
    if (spec_.microBatches == 1) return;
    ParamSet s{*this};
    param_steps::zeroBlockSums(s, sums_, block);
  }
  const CaseSpec& spec() const override { return spec_; }
  void reduceSharedGrads(const std::vector<int>& users, int owner) override {
    ParamSet s{*this};
    param_steps::reduceSharedGrads(s, users, owner);
  }
  bool stemBackward(int m, const DTensor<T>& dx) override {
    return stem_ && stem_->backward(microBatchFirstRow(spec_, m), dx);
  }
  void reduceTiedGrads(bool headContribution) override {
    ParamSet s{*this};
    param_steps::reduceTiedGrads(s, headContribution);
  }
  DeviceValues<T> values(const DTensor<T>& dx) override {
    DeviceValues<T> r;
    x_->download(&r.loss, lossSum_.data(), 1);
    for (auto* p : trainedParams()) r.grads.push_back(downloadMatrix(*x_, p->grad, p->name));
    if (dx.defined() && reportsInputGrad_) r.inputGrad = downloadMatrix(*x_, dx, "input");
    if (spec_.microBatches > 1 && reportsInputGrad_) r.inputGrad = inputGrad_;
    for (auto* b : buffers_) r.state.push_back(downloadMatrix(*x_, b->value, b->name));
    return r;
  }
  void sgd(bool frozenToo) override {
    ParamSet s{*this};
    param_steps::sgd(s, frozenToo);
  }

  std::vector<T> download(const DTensor<T>& t) override {
    std::vector<T> h(static_cast<size_t>(t.size()));
    x_->download(h.data(), t.data(), t.size());
    return h;
  }
  void upload(DTensor<T>& t, const std::vector<T>& host) override {
    if (static_cast<int64_t>(host.size()) != t.size()) throw std::logic_error("DeviceChain::upload: size differs");
    x_->upload(t.data(), host.data(), t.size());
  }
  void copy(DTensor<T>& dst, const DTensor<T>& src) override {
    if (dst.size() != src.size()) throw std::logic_error("DeviceChain::copy: sizes differ");
    x_->copy(dst.data(), src.data(), src.size());
    x_->synchronize();
  }
  std::string nodeKind(int block, int node) const override { return blocks_.at(at(block)).nodes.at(at(node)).opKind; }
  std::vector<DParam<T>*> blockParams(int block) override {
    std::vector<DParam<T>*> ps;
    for (auto& n : blocks_.at(at(block)).nodes)
      for (auto* p : n.op->params()) ps.push_back(p);
    return ps;
  }

  PoolStats memory() const override { return x_->pool().stats(); }
  void resetPeakMemory() override { x_->pool().resetPeak(); }
  void startTimer() override {
    x_->synchronize();
    start_ = std::chrono::steady_clock::now();
  }
  double stopTimerMs() override {
    x_->synchronize();
    return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start_).count();
  }

 protected:
  X& exec() { return *x_; }

 private:
  static size_t at(int i) { return static_cast<size_t>(i); }
  // reference/param_steps.h's parameter set on this chain: device tensors, each change a launch.
  struct ParamSet {
    using Param = DParam<T>;
    ExecChain& c;

    const CaseSpec& spec() const { return c.spec_; }
    std::vector<Param*> stemParams() { return c.stemParams(); }
    std::vector<Param*> blockParams(int i) { return c.blockParams(i); }
    std::vector<Param*> headParams() { return c.headParams(); }
    Param* tiedWeight() { return c.head_ && c.head_->tied ? &c.head_->weight : nullptr; }
    Param* embedding() { return c.stem_ ? &c.stem_->embedding() : nullptr; }
    void add(DTensor<T>& dst, const DTensor<T>& src) {
      c.x_->launch(dst.size(), AccumulateInto<T>{dst.data(), src.data()});
    }
    void copy(DTensor<T>& dst, const DTensor<T>& src) { c.x_->launch(dst.size(), Copy<T>{dst.data(), src.data()}); }
    void zero(DTensor<T>& dst) { c.x_->launch(dst.size(), Fill<T>{dst.data(), T(0)}); }
    void update(Param& p) { c.x_->launch(p.value.size(), SgdUpdate<T>{p.value.data(), p.grad.data(), c.lr_}); }
  };
  // The parameters that train, model order (the CPU chain's trainedParams()).
  std::vector<DParam<T>*> trainedParams() {
    ParamSet s{*this};
    return param_steps::trainedParams(s);
  }
  std::vector<DParam<T>*> stemParams() { return stem_ ? stem_->params() : std::vector<DParam<T>*>{}; }
  std::vector<DParam<T>*> headParams() { return head_ ? head_->params() : std::vector<DParam<T>*>{}; }
  X* x_;
  CaseSpec spec_;
  T lr_;
  Rng rng_;
  int64_t rows_, cols_;
  bool reportsInputGrad_;
  // A token case's stem and head (null for a dense case); the head before the losses, which point at it.
  std::unique_ptr<DTokenStem<T, X>> stem_;
  std::unique_ptr<DLmHead<T>> head_;
  std::vector<DBlock<T, X>> blocks_;
  std::vector<std::unique_ptr<DLoss<T, X>>> losses_;    // one per micro-batch
  std::vector<std::pair<int64_t, int64_t>> lossFlops_;  // per micro-batch: forward, backward FLOPs
  DTensor<T> lossSum_;                                  // the step's loss: the micro-batches' values added in order
  DTensor<T> passLoss_;                                 // a pass's loss with its loss trackers (scratch)
  std::vector<DTensor<T>> sums_;  // micro-batches: the step's gradient sums, trainedParams() order
  HostMatrix<T> inputGrad_;       // micro-batches: the step's input gradient, stacked
  DTensor<T> input_;
  std::vector<DParam<T>*> params_;
  std::vector<DBuffer<T>*> buffers_;
  std::vector<DBuffer<T>*> auxLoss_;  // the loss trackers among buffers_ (moe's aux_loss), model order
  std::chrono::steady_clock::time_point start_;
};

// The executor first among the bases: constructed before the chain's tensors and destroyed after them.
template <class X>
struct ExecHolder {
  X executor;
};

// An ExecChain that owns its executor.
template <class T, class X>
class OwningExecChain : private ExecHolder<X>, public ExecChain<T, X> {
 public:
  explicit OwningExecChain(const DeviceModel<T>& m) : ExecHolder<X>(), ExecChain<T, X>(ExecHolder<X>::executor, m) {}
};

}  // namespace ckpt::gpu
