// The time model of bench_engine's step benchmarks: a policy's time overhead predicted from the store-all step's
// own measured per-op times, next to its FLOP overhead.
//
//   predicted_time_overhead = sum over the op forwards the policy recomputes in one step (block b, node n, each
//                             as often as it is recomputed) of  t_fwd(b, n) / t_step
//                           + sum over its first-forward calls that keep no context (forward-phase calls with
//                             ctx == nullptr) of  (t_fwd(b, n) - t_first(b, n)) / t_step
//
// where t_fwd(b, n) is op (b, n)'s forward time on the case's own inputs and t_step the store-all reference
// step's (reference/trainer.h), the thread's CPU time summed over instrumented steps. During each store-all step
// every op forward is called twice more on the same inputs (same random draws, module state not updated, a context
// saved as the step saves it) and the second extra call is t_fwd: an op in steady state, its output allocated
// where a freed one was, as a recompute in the backward finds it; the step's own first calls pay for fresh pages
// of every activation the step keeps, which a recompute does not. CPU time, as BM_Step's time_overhead: on a
// shared machine wall time charges whatever the scheduler ran meanwhile to the op that happened to be running.
// t_first(b, n) is the store-all step's own call: the second term credits a policy for the forwards it runs into
// recycled memory because it keeps nothing from them (full recomputation's whole first forward), which would
// otherwise show as a negative tax. The
// FLOP overhead weighs a recomputed op by its FLOPs; this weighs it by the time it actually took, so a
// Philox dropout or a libm GELU counts for what it costs next to the GEMMs. What the prediction leaves out, the
// time-model tax (measured time overhead - predicted), is what the policy costs beyond re-running those ops:
// executor bookkeeping, allocation, cache effects of the other order of work.
// Which forwards a policy recomputes is counted on an instrumented chain (the executor's meter is in the
// recompute phase during block recomputes and op-level rebuilds), so the executor itself is not instrumented.
#pragma once
#include <ctime>
#include <map>
#include <memory>
#include <utility>
#include <vector>

#include "bench/recompute_profile.h"

namespace ckpt::bench {

using NodeKey = std::pair<int, int>;  // (block, node)

// CPU time of the calling thread (a system call, a few hundred ns: small next to any op of a benchmarked case).
inline double threadCpuSeconds() {
  timespec ts{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + 1e-9 * static_cast<double>(ts.tv_nsec);
}

struct NodeClock {
  bool measure = false;                   // time each forward's steady-state repeat (store-all steps)
  std::map<NodeKey, double> seconds;      // steady-state forward CPU time per op
  std::map<NodeKey, double> firstSeconds;  // the step's own forward CPU time per op
  double repeatSeconds = 0;               // CPU time of all the extra calls, taken out of the step's
  std::map<NodeKey, int64_t> recomputes;  // forward calls per op made in the recompute phase
  std::map<NodeKey, int64_t> unsaved;     // forward-phase calls per op that keep no context
};

// Per op, as shares of the store-all step: steady-state forward and the step's own forward.
struct ForwardShares {
  std::map<NodeKey, double> steady, first;
};

// Hands out what the caller's source gives and notes it, so the timed repeats can replay the same draw.
class RecordingDraws final : public DrawSource {
 public:
  RecordingDraws(DrawSource* inner, RngDraw* out) : inner_(inner), out_(out) {}
  RngDraw draw(int64_t n) override { return *out_ = inner_->draw(n); }

 private:
  DrawSource* inner_;
  RngDraw* out_;
};

template <class T>
class NodeTimedOp final : public ForwardingOp<T> {
 public:
  NodeTimedOp(std::unique_ptr<Op<T>> inner, NodeClock* clock, NodeKey key)
      : ForwardingOp<T>(std::move(inner)), clock_(clock), key_(key) {}
  Tensor<T> forward(std::span<const Tensor<T>> in, Context<T>* ctx, const OpEnv& env) override {
    const ActivationMeter* m = currentMeter();
    if (m && m->phase == Phase::kRecompute) ++clock_->recomputes[key_];
    if (m && m->phase == Phase::kForward && !ctx) ++clock_->unsaved[key_];
    if (!clock_->measure) return this->inner().forward(in, ctx, env);
    RngDraw draw;
    RecordingDraws recording(env.draws, &draw);
    OpEnv first = env;
    first.draws = &recording;
    const double f0 = threadCpuSeconds();
    Tensor<T> y = this->inner().forward(in, ctx, first);
    clock_->firstSeconds[key_] += threadCpuSeconds() - f0;
    NodeDraws replay(nullptr, 0, &draw, nullptr);
    OpEnv again = env;  // the same draws, and (below) the state put back
    again.draws = &replay;
    std::vector<Mat<T>> state;
    for (Buffer<T>* b : this->inner().buffers()) state.push_back(b->value);
    const double r0 = threadCpuSeconds();
    double timed = 0;
    for (int i = 0; i < 2; ++i) {
      Context<T> scratch;
      const double t0 = threadCpuSeconds();
      const Tensor<T> z = this->inner().forward(in, ctx ? &scratch : nullptr, again);
      timed = threadCpuSeconds() - t0;  // the second call's
    }
    clock_->seconds[key_] += timed;
    clock_->repeatSeconds += threadCpuSeconds() - r0;
    for (size_t i = 0; i < state.size(); ++i) this->inner().buffers()[i]->value = state[i];
    return y;
  }

 private:
  NodeClock* clock_;
  NodeKey key_;
};

template <class T>
Chain<T> nodeTimedChain(const CaseSpec& spec, NodeClock* clock) {
  Chain<T> c = buildChain<T>(spec);
  for (size_t b = 0; b < c.blocks.size(); ++b)
    for (size_t n = 0; n < c.blocks[b].nodes.size(); ++n) {
      auto& node = c.blocks[b].nodes[n];
      node.op = std::make_unique<NodeTimedOp<T>>(std::move(node.op), clock, NodeKey{static_cast<int>(b), static_cast<int>(n)});
    }
  return c;
}

// Per op, one forward call's steady-state CPU time as a share of the store-all reference step's (the extra calls
// taken out), summed over `steps` instrumented steps (after one to warm up).
template <class T>
ForwardShares storeAllForwardShares(const CaseSpec& spec, int steps) {
  NodeClock clock;
  Chain<T> c = nodeTimedChain<T>(spec, &clock);
  ChainSnapshot<T> start(c);
  double stepTotal = 0;
  std::map<NodeKey, double> steady, first;
  for (int i = 0; i < steps + 1; ++i) {
    start.restore();
    clock = NodeClock();
    clock.measure = true;
    const double t0 = threadCpuSeconds();
    referenceStep(c, 0);
    const double w = threadCpuSeconds() - t0 - clock.repeatSeconds;
    if (i == 0) continue;  // warm-up
    stepTotal += w;
    for (const auto& [key, t] : clock.seconds) steady[key] += t;
    for (const auto& [key, t] : clock.firstSeconds) first[key] += t;
  }
  // Store-all runs every op once per micro-batch (cases/micro_batches.h): a share is one call's, as the policy's
  // counts are calls.
  const double calls = stepTotal * static_cast<double>(spec.microBatches);
  ForwardShares shares;
  for (const auto& [key, t] : steady) shares.steady[key] = calls > 0 ? t / calls : 0.0;
  for (const auto& [key, t] : first) shares.first[key] = calls > 0 ? t / calls : 0.0;
  return shares;
}

// Which forwards the schedule recomputes, and which first forwards keep nothing, in one step (the same every step).
template <class T>
NodeClock policyForwardCounts(const CaseSpec& spec, const Schedule& schedule) {
  NodeClock clock;
  Chain<T> c = nodeTimedChain<T>(spec, &clock);
  executeStep(c, schedule, 0);
  return clock;
}

inline double predictTimeOverhead(const ForwardShares& shares, const NodeClock& counts) {
  auto share = [](const std::map<NodeKey, double>& m, const NodeKey& k) {
    const auto it = m.find(k);
    return it == m.end() ? 0.0 : it->second;
  };
  double p = 0;
  for (const auto& [key, count] : counts.recomputes) p += static_cast<double>(count) * share(shares.steady, key);
  for (const auto& [key, count] : counts.unsaved)
    p += static_cast<double>(count) * (share(shares.steady, key) - share(shares.first, key));
  return p;
}

}  // namespace ckpt::bench
