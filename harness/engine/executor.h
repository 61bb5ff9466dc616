// The executor: runs a validated schedule on a chain for real. It is the only schedule interpreter, for every
// backend: the CPU reference chain (cpu_backend.h) and the device chain on the GPU or its host emulator
// (device_backend.h), each with the same EngineVariant hooks. It is the only code that holds activations while
// checkpointing: x_0 (allocated from the chain input at step start), boundaries x_i, tapes and gradients g_i are
// all the backend's tensors charged to one ActivationMeter per step, and FLOPs are counted into the phase each
// instruction is in. Allocation order per instruction is the one schedule.h documents, which planner.cpp
// mirrors without tensors, so measured == planned exactly.
//
// RNG: the generator state where each block's first forward in the step starts is recorded; a recompute of the
// block runs from that state and the generator is put back afterwards, so the step leaves it where the
// reference leaves it (stateful model) and nothing changes for the counter-based model, whose op keys depend on
// step, block and node only. Recomputes never update module state. Every decision point is a hook of
// EngineVariant (engine_variant.h); the default variant is the correct engine.
#pragma once
#include <algorithm>
#include <chrono>
#include <ctime>
#include <optional>
#include <stdexcept>
#include <vector>

#include "harness/engine/chain_cost.h"
#include "harness/engine/cpu_backend.h"
#include "harness/engine/engine_variant.h"
#include "harness/engine/plan.h"
#include "harness/engine/schedule.h"
#include "cases/micro_batches.h"
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

// One step of a schedule on backend B (cpu_backend.h, device_backend.h: the backend owns the model, the
// block runtime and the loss; the runner owns the schedule's state and every hook call).
template <class B>
class StepRunner final : public StepView {
 public:
  using T = typename B::Scalar;
  using Act = typename B::Act;
  using Tape = typename B::Tape;

  StepRunner(B& b, const Schedule& s, int step, const EngineVariant& v, ExecutorTimes* times)
      : b_(b),
        s_(s),
        step_(step),
        v_(v),
        times_(times),
        n_(b.layers()),
        x_(at(n_) + 1),
        checkpoint_(at(n_) + 1, 0),
        g_(at(n_) + 1),
        tapes_(at(n_)),
        tapeRecomputed_(at(n_), 0),
        forwarded_(at(n_), 0),
        rngAtFirst_(at(n_)) {}

  // Runs the step: the schedule once per micro-batch (cases/micro_batches.h), each pass from fresh boundaries,
  // tapes and zero gradients, its gradients, loss and dx then taken into the step's sums by the backend. The
  // meter must outlive this runner's tensors (the caller owns both). Without `collect` the results are not
  // gathered (a device timing run skips the downloads), only the measurements and generator.
  StepResult<T> run(ActivationMeter& meter, bool collect = true) {
    meter_ = &meter;
    Act dx;
    {
      MeterScope scope(&meter);
      for (int m = 0; m < static_cast<int>(b_.spec().microBatches); ++m) {
        startPass(m);
        for (const Instr& in : s_.instrs) {
          switch (in.kind) {
            case InstrKind::kForward:
              forward(in.block, in.tape);
              break;
            case InstrKind::kFree:
              x_[at(in.block)].reset();
              checkpoint_[at(in.block)] = 0;
              break;
            case InstrKind::kLoss:
              runLoss();
              break;
            case InstrKind::kBackward:
              backward(in.block);
              break;
          }
        }
        dx = std::move(g_[0]);
        // A token case's stem takes dx into the embeddings' gradients (cases/lm_case.h).
        if (b_.stemBackward(m, dx)) dx.reset();
        for (const ShareGroup& g : shareGroups(b_.spec())) b_.reduceSharedGrads(v_.sharedGradOrder(g.users), g.owner);
        b_.reduceTiedGrads(v_.tiedHeadGradKept(firstRecomputed_));
        if (!v_.reportInputGradient()) dx.reset();
        b_.endMicroBatch(m, dx);
      }
    }
    StepResult<T> r = collect ? b_.collect(dx) : StepResult<T>();
    dx.reset();
    r.rng = b_.rng().state();
    r.flops = meter.flops;
    r.peakActivationBytes = meter.peak();
    r.forwardEvals = meter.forwardEvals;
    b_.sgd(v_.updatesFrozen());
    return r;
  }

  // StepView
  int layers() const override { return n_; }
  bool held(int b) const override { return b >= 0 && b <= n_ && x_[at(b)].defined(); }
  bool isCheckpoint(int b) const override { return held(b) && checkpoint_[at(b)]; }
  void copyBoundary(int dst, int src) override {
    Act& d = heldBoundary(dst);
    const Act& s = heldBoundary(src);
    if (d.rows() != s.rows() || d.cols() != s.cols()) throw std::logic_error("copyBoundary: shapes differ");
    b_.copy(d, s);
  }
  void mapBoundary(int b, const ElementFn& f) override { b_.mapInPlace(heldBoundary(b), f); }
  bool hasTape(int b) const override { return b >= 0 && b < n_ && tapes_[at(b)].has_value(); }
  int tapeNodes(int b) const override { return hasTape(b) ? static_cast<int>(tapes_[at(b)]->contexts.size()) : 0; }
  int contextTensors(int b, int node) const override {
    if (node < 0 || node >= tapeNodes(b)) return 0;
    const auto& ctx = tapes_[at(b)]->contexts[at(node)];
    return ctx ? static_cast<int>(ctx->tensors.size()) : 0;
  }
  void mapContextTensor(int b, int node, int t, const ElementFn& f) override {
    if (t < 0 || t >= contextTensors(b, node)) throw std::logic_error("mapContextTensor: no such context tensor");
    b_.mapInPlace(tapes_[at(b)]->contexts[at(node)]->tensors[at(t)], f);
  }
  std::string nodeKind(int b, int node) const override { return b_.nodeKind(b, node); }
  void mapParamGrads(int b, const ElementFn& f) override { b_.mapParamGrads(b, f); }
  bool requiresGrad(int boundary) const override { return boundaryRequiresGrad(b_.spec(), boundary); }
  int microBatch() const override { return micro_; }
  void zeroAccumulatedGrads(int block) override { b_.zeroAccumulated(block); }

 private:
  static size_t at(int i) { return static_cast<size_t>(i); }
  Act& heldBoundary(int b) {
    if (!held(b)) throw std::logic_error("engine variant touched x_" + std::to_string(b) + ", which is not held");
    return x_[at(b)];
  }

  // Micro-batch m's pass starts from nothing held but its x_0, and its blocks' first forwards are yet to run.
  void startPass(int m) {
    micro_ = m;
    passStep_ = microStep(b_.spec(), step_, m);
    for (auto& x : x_) x.reset();
    for (auto& g : g_) g.reset();
    for (auto& t : tapes_) t.reset();
    std::fill(checkpoint_.begin(), checkpoint_.end(), 0);
    std::fill(tapeRecomputed_.begin(), tapeRecomputed_.end(), 0);
    std::fill(forwarded_.begin(), forwarded_.end(), 0);
    firstRecomputed_ = false;
    b_.zeroGrads();
    meter_->phase = Phase::kForward;  // a token case's stem runs in input()
    x_[0] = b_.input(m);
    checkpoint_[0] = 1;
  }

  void forward(int i, bool withTape) {
    const bool recompute = forwarded_[at(i)] != 0;
    BlockEnv env = blockEnv(i);
    if (recompute) env = v_.recomputeEnv(env);
    v_.beforeForward(i, recompute, *this);
    const Act& input = heldBoundary(v_.forwardInput(i, recompute, *this));
    RngState live{};
    if (recompute) {
      live = b_.rng().state();
      v_.rngForRecompute(b_.rng(), rngAtFirst_[at(i)]);
      firstRecomputed_ |= i == 0;
    } else {
      rngAtFirst_[at(i)] = b_.rng().state();
      forwarded_[at(i)] = 1;
    }
    meter_->phase = recompute ? Phase::kRecompute : Phase::kForward;
    Tape* tape = nullptr;
    if (withTape) {
      tape = &tapes_[at(i)].emplace();
      tapeRecomputed_[at(i)] = recompute;
    }
    Act y;
    {
      Stopwatch watch(recompute ? times_ : nullptr);
      y = b_.forward(i, input, tape, s_.keepFor(i), env);
    }
    ++meter_->forwardEvals;
    if (recompute) v_.rngAfterRecompute(b_.rng(), live);
    x_[at(i) + 1] = std::move(y);
    checkpoint_[at(i) + 1] = !recompute;
    v_.afterForward(i, recompute, *this);
  }

  // Where block i runs in this pass: the case's numerics, state updates on (a recompute's env is the variant's).
  BlockEnv blockEnv(int i) { return BlockEnv{&b_.rng(), passStep_, i, true, caseNumerics(b_.spec()), {}}; }

  void runLoss() {
    g_[at(n_)] = b_.loss(x_[at(n_)], *meter_, micro_);
    x_[at(n_)].reset();
    checkpoint_[at(n_)] = 0;
  }

  void backward(int i) {
    Tape tape = std::move(*tapes_[at(i)]);
    tapes_[at(i)].reset();
    bool dropped = false;
    for (const auto& ctx : tape.contexts) dropped |= !ctx.has_value();
    if (dropped) {
      meter_->phase = Phase::kRecompute;
      Stopwatch watch(times_);
      b_.recomputeDropped(i, tape, v_.recomputeEnv(blockEnv(i)));
    }
    meter_->phase = Phase::kBackward;
    g_[at(i)] = b_.backward(i, std::move(tape), std::move(g_[at(i) + 1]));
    v_.afterBackward(i, dropped || tapeRecomputed_[at(i)], *this);
  }

  B& b_;
  const Schedule& s_;
  int step_;
  int micro_ = 0;                 // the micro-batch of the pass running
  int passStep_ = 0;              // its step as the counter-based generator keys it (microStep)
  bool firstRecomputed_ = false;  // block 0 ran a recompute forward in this pass
  const EngineVariant& v_;
  ExecutorTimes* times_;
  int n_;
  ActivationMeter* meter_ = nullptr;
  std::vector<Act> x_;            // boundaries x_0..x_L
  std::vector<char> checkpoint_;  // x_i came from a first forward (or is x_0)
  std::vector<Act> g_;            // gradients g_0..g_L
  std::vector<std::optional<Tape>> tapes_;
  std::vector<char> tapeRecomputed_;  // the live tape came from a recompute forward
  std::vector<char> forwarded_;       // the block's first forward of the step has run
  std::vector<RngState> rngAtFirst_;  // the generator where that first forward started
};

}  // namespace detail

// One training step of `schedule` (which must have passed validateSchedule; executeSteps checks it) on `chain`:
// zero gradients, run the instructions, collect the results and measurements, SGD update. `times`, when given,
// accumulates the recompute wall time.
template <class T>
StepResult<T> executeStep(Chain<T>& chain, const Schedule& schedule, int step,
                          const EngineVariant& variant = EngineVariant(), ExecutorTimes* times = nullptr) {
  ActivationMeter meter;  // declared before the runner: its tensors are released into it
  CpuBackend<T> backend(chain);
  detail::StepRunner<CpuBackend<T>> runner(backend, schedule, step, variant, times);
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
