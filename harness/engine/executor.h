// The executor: runs a validated schedule on a chain for real. It is the only code that holds activations while
// checkpointing: x_0 (allocated from the chain input at step start), boundaries x_i, tapes and gradients g_i are
// all Tensor<T>s charged to one ActivationMeter per step, and FLOPs are counted into the phase each instruction
// is in. Allocation order per instruction is the one schedule.h documents, which planner.cpp mirrors without
// tensors, so measured == planned exactly.
//
// RNG: the generator state where each block's first forward in the step starts is recorded; a recompute of the
// block runs from that state and the generator is put back afterwards, so the step leaves it where the
// reference leaves it (stateful model) and nothing changes for the counter-based model, whose op keys depend on
// step, block and node only. Recomputes never update module state. Every decision point is a hook of
// EngineVariant (engine_variant.h); the default variant is the correct engine.
#pragma once
#include <chrono>
#include <ctime>
#include <optional>
#include <stdexcept>
#include <vector>

#include "harness/engine/chain_cost.h"
#include "harness/engine/engine_variant.h"
#include "harness/engine/plan.h"
#include "harness/engine/schedule.h"
#include "reference/step.h"

namespace ckpt {

// Time the executor spent re-running forwards (block-level recomputes and op-level rebuilds of dropped
// contexts), accumulated over steps: a report splits a policy's step time into the reference's work, this, and
// the engine's own bookkeeping, which must stay invisible next to the math. CPU time is kept besides wall time
// because it barely moves when other processes share the cores.
struct ExecutorTimes {
  double recomputeMs = 0;     // wall
  double recomputeCpuMs = 0;  // this process's CPU time
};

// This process's CPU time in milliseconds.
inline double processCpuMs() {
  timespec ts{};
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) * 1e3 + static_cast<double>(ts.tv_nsec) * 1e-6;
}

namespace detail {

class Stopwatch {
 public:
  explicit Stopwatch(ExecutorTimes* t) : t_(t) {
    if (!t_) return;
    wall_ = std::chrono::steady_clock::now();
    cpu_ = processCpuMs();
  }
  ~Stopwatch() {
    if (!t_) return;
    t_->recomputeMs += std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - wall_).count();
    t_->recomputeCpuMs += processCpuMs() - cpu_;
  }
  Stopwatch(const Stopwatch&) = delete;
  Stopwatch& operator=(const Stopwatch&) = delete;

 private:
  ExecutorTimes* t_;
  std::chrono::steady_clock::time_point wall_;
  double cpu_ = 0;
};

template <class T>
class StepRunner final : public StepView {
 public:
  StepRunner(Chain<T>& c, const Schedule& s, int step, const EngineVariant& v, ExecutorTimes* times)
      : c_(c), s_(s), step_(step), v_(v), times_(times), x_(static_cast<size_t>(c.size()) + 1),
        checkpoint_(static_cast<size_t>(c.size()) + 1, 0), g_(static_cast<size_t>(c.size()) + 1),
        tapes_(static_cast<size_t>(c.size())), tapeRecomputed_(static_cast<size_t>(c.size()), 0),
        forwarded_(static_cast<size_t>(c.size()), 0), rngAtFirst_(static_cast<size_t>(c.size())) {}

  // Runs the step; the meter must outlive this runner's tensors (the caller owns both).
  StepResult<T> run(ActivationMeter& meter) {
    meter_ = &meter;
    T loss = 0;
    Tensor<T> dx;
    {
      MeterScope scope(&meter);
      zeroGrads(c_);
      x_[0] = Tensor<T>::from(c_.input);
      checkpoint_[0] = 1;
      for (const Instr& in : s_.instrs) {
        switch (in.kind) {
          case InstrKind::kForward: forward(in.block, in.tape); break;
          case InstrKind::kFree: x_[at(in.block)].reset(); checkpoint_[at(in.block)] = 0; break;
          case InstrKind::kLoss: loss = runLoss(); break;
          case InstrKind::kBackward: backward(in.block); break;
        }
      }
      dx = std::move(g_[0]);
    }
    StepResult<T> r = collectStep(c_, loss, v_.reportInputGradient() ? dx : Tensor<T>());
    dx.reset();
    r.flops = meter.flops;
    r.peakActivationBytes = meter.peak();
    r.forwardEvals = meter.forwardEvals;
    sgdUpdate(c_);
    return r;
  }

  // StepView
  int layers() const override { return c_.size(); }
  bool held(int b) const override { return b >= 0 && b <= c_.size() && x_[at(b)].defined(); }
  bool isCheckpoint(int b) const override { return held(b) && checkpoint_[at(b)]; }
  void copyBoundary(int dst, int src) override {
    Tensor<T>& d = heldBoundary(dst);
    const Tensor<T>& s = heldBoundary(src);
    if (d.rows() != s.rows() || d.cols() != s.cols()) throw std::logic_error("copyBoundary: shapes differ");
    d.map() = s.map();
  }
  void mapBoundary(int b, const ElementFn& f) override { mapInPlace(heldBoundary(b), f); }
  bool hasTape(int b) const override { return b >= 0 && b < c_.size() && tapes_[at(b)].has_value(); }
  int tapeNodes(int b) const override { return hasTape(b) ? static_cast<int>(tapes_[at(b)]->contexts.size()) : 0; }
  int contextTensors(int b, int node) const override {
    if (node < 0 || node >= tapeNodes(b)) return 0;
    const auto& ctx = tapes_[at(b)]->contexts[static_cast<size_t>(node)];
    return ctx ? static_cast<int>(ctx->tensors.size()) : 0;
  }
  void mapContextTensor(int b, int node, int t, const ElementFn& f) override {
    if (t < 0 || t >= contextTensors(b, node)) throw std::logic_error("mapContextTensor: no such context tensor");
    mapInPlace(tapes_[at(b)]->contexts[static_cast<size_t>(node)]->tensors[static_cast<size_t>(t)], f);
  }
  std::string nodeKind(int b, int node) const override {
    return c_.blocks.at(at(b)).nodes.at(static_cast<size_t>(node)).op->kind();
  }
  void mapParamGrads(int b, const ElementFn& f) override {
    for (auto& node : c_.blocks.at(at(b)).nodes)
      for (auto* p : node.op->params()) p->grad = p->grad.unaryExpr([&](T v) { return static_cast<T>(f(v)); });
  }

 private:
  static size_t at(int i) { return static_cast<size_t>(i); }
  Tensor<T>& heldBoundary(int b) {
    if (!held(b)) throw std::logic_error("engine variant touched x_" + std::to_string(b) + ", which is not held");
    return x_[at(b)];
  }
  static void mapInPlace(Tensor<T>& t, const ElementFn& f) {
    T* d = t.data();
    for (int64_t k = 0; k < t.size(); ++k) d[k] = static_cast<T>(f(static_cast<double>(d[k])));
  }

  void forward(int i, bool withTape) {
    const bool recompute = forwarded_[at(i)] != 0;
    BlockEnv env{&c_.rng, step_, i, true, {}};
    if (recompute) env = v_.recomputeEnv(env);
    v_.beforeForward(i, recompute, *this);
    const Tensor<T>& input = heldBoundary(v_.forwardInput(i, recompute, *this));
    RngState live{};
    if (recompute) {
      live = c_.rng.state();
      v_.rngForRecompute(c_.rng, rngAtFirst_[at(i)]);
    } else {
      rngAtFirst_[at(i)] = c_.rng.state();
      forwarded_[at(i)] = 1;
    }
    meter_->phase = recompute ? Phase::kRecompute : Phase::kForward;
    BlockTape<T>* tape = nullptr;
    if (withTape) {
      tape = &tapes_[at(i)].emplace();
      tapeRecomputed_[at(i)] = recompute;
    }
    Tensor<T> y;
    {
      Stopwatch watch(recompute ? times_ : nullptr);
      y = blockForward(c_.blocks[at(i)], input, tape, s_.keepFor(i), env);
    }
    ++meter_->forwardEvals;
    if (recompute) v_.rngAfterRecompute(c_.rng, live);
    x_[at(i) + 1] = std::move(y);
    checkpoint_[at(i) + 1] = !recompute;
    v_.afterForward(i, recompute, *this);
  }

  T runLoss() {
    const int n = c_.size();
    const OpMeta m = c_.loss->meta(c_.boundaryShape());
    Context<T> ctx;
    meter_->phase = Phase::kForward;
    const T loss = c_.loss->forward(x_[at(n)], &ctx);
    meter_->countFlops(m.forwardFlops);
    meter_->phase = Phase::kBackward;
    g_[at(n)] = c_.loss->backward(ctx);
    meter_->countFlops(m.backwardFlops);
    x_[at(n)].reset();
    checkpoint_[at(n)] = 0;
    ctx = Context<T>();
    return loss;
  }

  void backward(int i) {
    BlockTape<T> tape = std::move(*tapes_[at(i)]);
    tapes_[at(i)].reset();
    bool dropped = false;
    for (const auto& ctx : tape.contexts) dropped |= !ctx.has_value();
    if (dropped) {
      meter_->phase = Phase::kRecompute;
      Stopwatch watch(times_);
      recomputeDropped(c_.blocks[at(i)], tape, v_.recomputeEnv(BlockEnv{&c_.rng, step_, i, true, {}}));
    }
    meter_->phase = Phase::kBackward;
    g_[at(i)] = blockBackward(c_.blocks[at(i)], std::move(tape), std::move(g_[at(i) + 1]));
    v_.afterBackward(i, dropped || tapeRecomputed_[at(i)], *this);
  }

  Chain<T>& c_;
  const Schedule& s_;
  int step_;
  const EngineVariant& v_;
  ExecutorTimes* times_;
  ActivationMeter* meter_ = nullptr;
  std::vector<Tensor<T>> x_;                      // boundaries x_0..x_L
  std::vector<char> checkpoint_;                  // x_i came from a first forward (or is x_0)
  std::vector<Tensor<T>> g_;                      // gradients g_0..g_L
  std::vector<std::optional<BlockTape<T>>> tapes_;
  std::vector<char> tapeRecomputed_;              // the live tape came from a recompute forward
  std::vector<char> forwarded_;                   // the block's first forward of the step has run
  std::vector<RngState> rngAtFirst_;              // the generator where that first forward started
};

}  // namespace detail

// One training step of `schedule` (which must have passed validateSchedule; executeSteps checks it) on `chain`:
// zero gradients, run the instructions, collect the results and measurements, SGD update. `times`, when given,
// accumulates the recompute wall time.
template <class T>
StepResult<T> executeStep(Chain<T>& chain, const Schedule& schedule, int step,
                          const EngineVariant& variant = EngineVariant(), ExecutorTimes* times = nullptr) {
  ActivationMeter meter;  // declared before the runner: its tensors are released into it
  detail::StepRunner<T> runner(chain, schedule, step, variant, times);
  return runner.run(meter);
}

template <class T>
std::vector<StepResult<T>> executeSteps(Chain<T>& chain, const Schedule& schedule, int steps,
                                        const EngineVariant& variant = EngineVariant(),
                                        ExecutorTimes* times = nullptr) {
  validateSchedule(schedule, chainCost(chain));
  std::vector<StepResult<T>> rs;
  for (int s = 0; s < steps; ++s) rs.push_back(executeStep(chain, schedule, s, variant, times));
  return rs;
}

// Compiled once, in harness/engine/executor.cpp.
extern template StepResult<float> executeStep<float>(Chain<float>&, const Schedule&, int, const EngineVariant&,
                                                     ExecutorTimes*);
extern template StepResult<double> executeStep<double>(Chain<double>&, const Schedule&, int, const EngineVariant&,
                                                       ExecutorTimes*);
extern template std::vector<StepResult<float>> executeSteps<float>(Chain<float>&, const Schedule&, int,
                                                                   const EngineVariant&, ExecutorTimes*);
extern template std::vector<StepResult<double>> executeSteps<double>(Chain<double>&, const Schedule&, int,
                                                                     const EngineVariant&, ExecutorTimes*);

}  // namespace ckpt
