// A chain on a device executor and its training step under a schedule: harness/engine/executor.h's StepRunner
// (the correct engine, no variant hooks) over the device block runtime. Same instruction semantics, same
// allocation order, same RNG handling: the generator state where each block's first forward of the step starts
// is recorded, a recompute runs from it and the generator is put back afterwards; recomputes never update
// module state. So on one executor, any valid schedule gives the store-all schedule's loss, gradients, state and
// generator bit for bit, and the measured activation peak and FLOPs equal the planner's.
#pragma once
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "reference/cuda/dblock.h"

namespace ckpt::gpu {

template <class T, class X>
class DeviceTrainer {
 public:
  DeviceTrainer(X& x, const DeviceModel<T>& m)
      : x_(&x), spec_(m.spec), rng_(m.rngModel, m.rng.seed), rows_(m.input.rows), cols_(m.input.cols) {
    rng_.setState(m.rng);
    for (const auto& bd : m.blocks) {
      DBlock<T, X> b;
      b.kind = bd.kind;
      for (const auto& nd : bd.nodes)
        b.nodes.push_back(DNode<T, X>{nd.name, makeDeviceOp<T, X>(x, nd), nd.inputs, nd.forwardFlops, nd.backwardFlops});
      blocks_.push_back(std::move(b));
    }
    loss_ = std::make_unique<DLoss<T, X>>(x, m.loss, rows_, cols_);
    lossForwardFlops_ = m.loss.forwardFlops;
    lossBackwardFlops_ = m.loss.backwardFlops;
    input_ = uploadMatrix(x, m.input);
    for (auto& b : blocks_)
      for (auto& n : b.nodes) {
        for (auto* p : n.op->params()) params_.push_back(p);
        for (auto* s : n.op->buffers()) buffers_.push_back(s);
      }
  }

  int layers() const { return static_cast<int>(blocks_.size()); }
  const Rng& rng() const { return rng_; }
  X& exec() { return *x_; }

  // One step: zero gradients, run the schedule, SGD update. With collect, the results are downloaded (after
  // the step's work, before the update); without, only the measurements are filled (for timing).
  DeviceStepResult<T> step(const DeviceSchedule& s, int step, bool collect = true) {
    if (s.layers != layers())
      throw std::invalid_argument("schedule '" + s.policy + "' is for " + std::to_string(s.layers) +
                                  " layers, the chain has " + std::to_string(layers()));
    ActivationMeter meter;  // before the runner state: its tensors are released into it
    DeviceStepResult<T> r;
    {
      Runner run(*this, s, step, meter);
      run.run();
      if (collect) {
        r.loss = lossValue();
        for (auto* p : params_) r.grads.push_back(downloadMatrix(*x_, p->grad, p->name));
        if (run.dx.defined()) r.inputGrad = downloadMatrix(*x_, run.dx, "input");
        for (auto* b : buffers_) r.state.push_back(downloadMatrix(*x_, b->value, b->name));
      }
    }
    r.rng = rng_.state();
    r.flops = meter.flops;
    r.peakActivationBytes = meter.peak();
    r.forwardEvals = meter.forwardEvals;
    const T lr = static_cast<T>(spec_.lr);
    for (auto* p : params_) x_->launch(p->value.size(), SgdUpdate<T>{p->value.data(), p->grad.data(), lr});
    return r;
  }

  T lossValue() {
    T v;
    x_->download(&v, loss_->value().data(), 1);
    return v;
  }

 private:
  class Runner {
   public:
    Runner(DeviceTrainer& t, const DeviceSchedule& s, int step, ActivationMeter& meter)
        : t_(t), s_(s), step_(step), meter_(meter), scope_(&meter), x_(at(t.layers()) + 1), g_(at(t.layers()) + 1),
          tapes_(at(t.layers())), forwarded_(at(t.layers()), 0), rngAtFirst_(at(t.layers())) {}

    void run() {
      for (auto* p : t_.params_) t_.x_->launch(p->grad.size(), Fill<T>{p->grad.data(), T(0)});
      x_[0] = cloneActivation(*t_.x_, t_.input_);
      for (const DInstr& in : s_.instrs) {
        switch (in.kind) {
          case DInstrKind::kForward: forward(in.block, in.tape); break;
          case DInstrKind::kFree: boundary(in.block, "free").reset(); break;
          case DInstrKind::kLoss: loss(); break;
          case DInstrKind::kBackward: backward(in.block); break;
        }
      }
      dx = std::move(g_[0]);
    }
    DTensor<T> dx;

   private:
    static size_t at(int i) { return static_cast<size_t>(i); }
    DTensor<T>& boundary(int b, const char* what) {
      if (b < 0 || b > t_.layers()) throw std::logic_error(std::string(what) + ": no boundary x_" + std::to_string(b));
      return x_[at(b)];
    }
    DBlockEnv env(int i, bool updateState) const {
      return DBlockEnv{&t_.rng_, step_, i, updateState, false, false};
    }

    void forward(int i, bool withTape) {
      const bool recompute = forwarded_[at(i)] != 0;
      const DTensor<T>& input = boundary(i, "forward");
      if (!input.defined()) throw std::logic_error("forward " + std::to_string(i) + ": x_i is not held");
      RngState live{};
      if (recompute) {
        live = t_.rng_.state();
        t_.rng_.setState(rngAtFirst_[at(i)]);
      } else {
        rngAtFirst_[at(i)] = t_.rng_.state();
        forwarded_[at(i)] = 1;
      }
      meter_.phase = recompute ? Phase::kRecompute : Phase::kForward;
      DBlockTape<T>* tape = withTape ? &tapes_[at(i)].emplace() : nullptr;
      const DKeepMask& keep = s_.keep.empty() ? kAll : s_.keep[at(i)];
      DTensor<T> y = deviceBlockForward(t_.blocks_[at(i)], input, tape, keep, env(i, !recompute));
      ++meter_.forwardEvals;
      if (recompute) t_.rng_.setState(live);
      x_[at(i) + 1] = std::move(y);
    }

    void loss() {
      const int n = t_.layers();
      DContext<T> ctx;
      meter_.phase = Phase::kForward;
      t_.loss_->forward(boundary(n, "loss"), &ctx);
      meter_.countFlops(t_.lossForwardFlops_);
      meter_.phase = Phase::kBackward;
      g_[at(n)] = t_.loss_->backward(ctx);
      meter_.countFlops(t_.lossBackwardFlops_);
      x_[at(n)].reset();
      ctx = DContext<T>();
    }

    void backward(int i) {
      if (!tapes_[at(i)]) throw std::logic_error("backward " + std::to_string(i) + ": block has no tape");
      DBlockTape<T> tape = std::move(*tapes_[at(i)]);
      tapes_[at(i)].reset();
      bool dropped = false;
      for (const auto& ctx : tape.contexts) dropped |= !ctx.has_value();
      if (dropped) {
        meter_.phase = Phase::kRecompute;
        deviceRecomputeDropped(t_.blocks_[at(i)], tape, env(i, false));
      }
      meter_.phase = Phase::kBackward;
      g_[at(i)] = deviceBlockBackward(*t_.x_, t_.blocks_[at(i)], std::move(tape), std::move(g_[at(i) + 1]));
    }

    inline static const DKeepMask kAll{};
    DeviceTrainer& t_;
    const DeviceSchedule& s_;
    int step_;
    ActivationMeter& meter_;
    MeterScope scope_;
    std::vector<DTensor<T>> x_;
    std::vector<DTensor<T>> g_;
    std::vector<std::optional<DBlockTape<T>>> tapes_;
    std::vector<char> forwarded_;
    std::vector<RngState> rngAtFirst_;
  };

  X* x_;
  CaseSpec spec_;
  Rng rng_;
  int64_t rows_, cols_;
  std::vector<DBlock<T, X>> blocks_;
  std::unique_ptr<DLoss<T, X>> loss_;
  int64_t lossForwardFlops_ = 0, lossBackwardFlops_ = 0;
  DTensor<T> input_;
  std::vector<DParam<T>*> params_;
  std::vector<DBuffer<T>*> buffers_;
};

}  // namespace ckpt::gpu
