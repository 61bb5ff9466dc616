// Shared by bench_engine's step benchmarks: putting a chain back to its starting weights before every timed
// step, and the instrumented step that says where a policy's recompute time goes.
#pragma once
#include <algorithm>
#include <chrono>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "bench/forwarding_op.h"
#include "harness/engine/executor.h"
#include "reference/trainer.h"

namespace ckpt::bench {

using Clock = std::chrono::steady_clock;

inline double seconds(Clock::time_point a, Clock::time_point b) { return std::chrono::duration<double>(b - a).count(); }

inline double median(std::vector<double> v) {
  if (v.empty()) return 0.0;
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

// Weights, module state and generator of a chain, to put it back before every timed step.
template <class T>
class ChainSnapshot {
 public:
  explicit ChainSnapshot(Chain<T>& c) : c_(c), rng_(c.rng.state()) {
    for (auto* p : c.params()) params_.push_back(p->value);
    for (auto* b : c.buffers()) buffers_.push_back(b->value);
  }
  void restore() {
    size_t i = 0;
    for (auto* p : c_.params()) p->value = params_[i++];
    i = 0;
    for (auto* b : c_.buffers()) b->value = buffers_[i++];
    c_.rng.setState(rng_);
  }

 private:
  Chain<T>& c_;
  RngState rng_;
  std::vector<Mat<T>> params_;
  std::vector<Mat<T>> buffers_;
};

// Where the recompute time goes. An instrumented copy of the policy's chain wraps every op in a TimedOp that
// clocks its forward calls made while the executor's meter is in the recompute phase (block recomputes and
// op-level rebuilds of dropped contexts), per op kind, with their FLOPs. Separate instrumented steps give
//   recompute_time_share = time inside recomputed op forwards / the whole step,
// (the median over the instrumented steps), which splits the engine tax (time ratio R, FLOP overhead F) in two:
//   R * share - F        recomputed ops cost more (or less) time than their FLOP share of the step
//                        (Philox dropout, libm activations: far more time per FLOP than the GEMMs);
//   R * (1 - share) - 1  everything else the policy's step spends beyond the reference step: executor
//                        bookkeeping, allocation and page faults, cache effects of another order of work.
// The clock is steady_clock (a vDSO call, tens of ns, so the instrumented step is hardly disturbed); the timed
// samples above run on uninstrumented chains.
struct RecomputeClock {
  std::map<std::string, double> seconds;  // per op kind
  std::map<std::string, int64_t> flops;
  double total() const {
    double t = 0;
    for (const auto& [k, v] : seconds) t += v;
    return t;
  }
};

template <class T>
class TimedOp final : public ForwardingOp<T> {
 public:
  TimedOp(std::unique_ptr<Op<T>> inner, RecomputeClock* clock)
      : ForwardingOp<T>(std::move(inner)), clock_(clock), kind_(this->inner().kind()) {}
  Tensor<T> forward(std::span<const Tensor<T>> in, Context<T>* ctx, const OpEnv& env) override {
    const ActivationMeter* m = currentMeter();
    if (!m || m->phase != Phase::kRecompute) return this->inner().forward(in, ctx, env);
    const auto t0 = Clock::now();
    Tensor<T> y = this->inner().forward(in, ctx, env);
    clock_->seconds[kind_] += seconds(t0, Clock::now());
    std::vector<Shape> shapes;
    for (const auto& t : in) shapes.push_back({t.rows(), t.cols()});
    clock_->flops[kind_] += this->inner().meta(shapes).forwardFlops;
    return y;
  }

 private:
  RecomputeClock* clock_;
  std::string kind_;
};

// Runs `steps` instrumented steps of the schedule (after one to warm up) from the chain's starting weights;
// returns the median over the steps of the share of the step inside recomputed op forwards, and per op kind its
// share of that time and its recompute FLOPs in one step.
struct RecomputeProfile {
  double share = 0;
  std::map<std::string, double> kindShare;  // of the step's time
  std::map<std::string, int64_t> kindFlops;
};

template <class T>
RecomputeProfile profileRecompute(const CaseSpec& spec, const Schedule& schedule, int steps) {
  RecomputeClock clock;
  Chain<T> c = buildChain<T>(spec);
  for (auto& b : c.blocks)
    for (auto& n : b.nodes) n.op = std::make_unique<TimedOp<T>>(std::move(n.op), &clock);
  ChainSnapshot<T> start(c);
  std::vector<double> shares;
  RecomputeClock total;
  for (int i = 0; i < steps + 1; ++i) {
    start.restore();
    clock = RecomputeClock();
    const auto t0 = Clock::now();
    executeStep(c, schedule, 0);
    const double w = seconds(t0, Clock::now());
    if (i == 0) continue;  // warm-up
    shares.push_back(w > 0 ? clock.total() / w : 0.0);
    for (const auto& [k, t] : clock.seconds) total.seconds[k] += t;
    total.flops = clock.flops;  // the same every step
  }
  RecomputeProfile p;
  p.share = median(shares);
  const double all = total.total();
  for (const auto& [k, t] : total.seconds) p.kindShare[k] = all > 0 ? p.share * t / all : 0.0;
  p.kindFlops = total.flops;
  return p;
}

}  // namespace ckpt::bench
