// The time model of bench_engine's step benchmarks: a policy's time overhead predicted from the store-all step's
// own measured per-op times and weights fitted on the case's calibration schedules (bench/time_model_fit.h), next
// to its FLOP overhead.
//
//   predicted_time_overhead = a_tape    * sum over the op forwards the policy recomputes with a tape in a block
//                                         recompute (block b, node n, as often as it does) of  t_fwd(b, n) / t_step
//                           + a_advance * sum over those it recomputes keeping nothing (a block only advanced)
//                                         of  t_adv(b, n) / t_step
//                           + a_rebuild * sum over the op-level rebuilds of the contexts its keep masks drop
//                                         (selective) of  t_fwd(b, n) / t_step
//
// t_step is the store-all reference step (reference/trainer.h) on an uninstrumented chain, CPU time of the thread
// (as BM_Step's time_overhead: on a shared machine wall time charges whatever the scheduler ran meanwhile to the
// op that happened to be running). The per-op times come from instrumented store-all steps, in which every op
// forward is called three more times on the same inputs (the same random draws; module state and parameter
// gradients put back afterwards): once to warm, once saving a context as the step does (t_fwd) and once saving
// nothing (t_adv: saving writes a dropout mask or attention probabilities of its own).
// The weights say what a recomputed op really costs in a step, where the per-op repeats cannot: a_tape the
// taped recompute together with what it changes around it (the first forward that keeps nothing runs in recycled
// memory, the backward right after the recompute finds its context in cache where store-all reads it from beyond
// the L2 cache; 0.71 on mlp-deep, whose 6.4 MB store-all step overflows a 2 MB L2, 0.93 on gpt-tiny, whose 0.7 MB
// fits, 2026-12-06), a_advance the recompute that only advances (nothing saved, its input just made), a_rebuild
// the op-level rebuild of selective: single ops re-run from kept inputs right before their block's backward, with
// the runtime's per-node work around each, in a step whose dropped contexts shrank its footprint (0.59-0.95 where
// a_tape is 0.61-0.91 on the same cases, 2026-12-07). They are fitted per case on its calibration schedules
// (time_model_fit.h): full recomputation and schedules no catalogue policy runs, each timed side by side with
// store-all in BM_Step's own pairs (bench/side_by_side.h).
// Instrumented steps run for at least half a second: a case of microsecond ops needs hundreds of them before
// its per-op sums stop moving from run to run. Each is followed by an uninstrumented one, whose times sum to
// t_step's: the two are measured over the same stretch of time.
// The FLOP overhead weighs a recomputed op by its FLOPs; this weighs it by the time it actually took, so a Philox
// dropout or an element-wise activation counts for what it costs next to the GEMMs. What the prediction leaves
// out, the time-model tax (measured time overhead - predicted), is executor bookkeeping and whatever in a policy's
// step the calibration schedules do not show.
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
  bool measure = false;                          // time each forward's steady-state repeat (store-all steps)
  std::map<NodeKey, double> seconds;             // steady-state forward CPU time per op, saving a context
  std::map<NodeKey, double> untapedSeconds;      // the same, saving none
  std::map<NodeKey, int64_t> recomputes;         // forward calls per op made in the recompute phase, saving a context
  std::map<NodeKey, int64_t> recomputesUntaped;  // the same, saving none
};

// Per op, as shares of the store-all step: t_fwd (steady) and t_adv (untaped).
struct ForwardShares {
  std::map<NodeKey, double> steady, untaped;
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
    if (m && m->phase == Phase::kRecompute) ++(ctx ? clock_->recomputes : clock_->recomputesUntaped)[key_];
    if (!clock_->measure) return this->inner().forward(in, ctx, env);
    RngDraw draw;
    RecordingDraws recording(env.draws, &draw);
    OpEnv first = env;
    first.draws = &recording;
    Tensor<T> y = this->inner().forward(in, ctx, first);
    NodeDraws replay(nullptr, 0, &draw, nullptr);
    OpEnv again = env;  // the same draws, and (below) the state and the gradients put back
    again.draws = &replay;
    std::vector<Mat<T>> state;
    for (Buffer<T>* b : this->inner().buffers()) state.push_back(b->value);
    // Warm once, then time a call that saves a context as the step's does (a recompute with tape) and a call
    // that saves nothing (a recompute that only advances): saving costs writes of its own (a dropout mask,
    // attention probabilities).
    for (int i = 0; i < 3; ++i) {
      Context<T> scratch;
      const bool save = ctx && i < 2;
      const double t0 = threadCpuSeconds();
      const Tensor<T> z = this->inner().forward(in, save ? &scratch : nullptr, again);
      const double t = threadCpuSeconds() - t0;
      if (i == 1) clock_->seconds[key_] += t;
      if (i == 2) clock_->untapedSeconds[key_] += t;
    }
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
      const NodeKey key{static_cast<int>(b), static_cast<int>(n)};
      node.op = std::make_unique<NodeTimedOp<T>>(std::move(node.op), clock, key);
    }
  return c;
}

// Per op, its times (t_fwd, t_adv) as shares of one store-all step.
template <class T>
ForwardShares storeAllForwardShares(const CaseSpec& spec, int steps) {
  // At least `steps` steps of each kind, and at least kMinSeconds of instrumented ones, an instrumented and a
  // plain step in turn: the shares are ratios of the two, and a machine whose speed drifts over a second (a
  // shared VM's) moved them by a tenth when all of one kind ran before all of the other.
  constexpr double kMinSeconds = 0.5;
  NodeClock clock;
  Chain<T> c = nodeTimedChain<T>(spec, &clock);
  ChainSnapshot<T> start(c);
  Chain<T> plain = buildChain<T>(spec);
  ChainSnapshot<T> plainStart(plain);
  std::map<NodeKey, double> steady, untaped;
  double plainTotal = 0;
  const double begin = threadCpuSeconds();
  for (int i = 0; i < steps + 1 || threadCpuSeconds() - begin < kMinSeconds; ++i) {
    start.restore();
    clock = NodeClock();
    clock.measure = true;
    referenceStep(c, 0);
    plainStart.restore();
    const double t0 = threadCpuSeconds();
    referenceStep(plain, 0);
    const double plainSeconds = threadCpuSeconds() - t0;
    if (i == 0) continue;  // warm-up
    for (const auto& [key, t] : clock.seconds) steady[key] += t;
    for (const auto& [key, t] : clock.untapedSeconds) untaped[key] += t;
    plainTotal += plainSeconds;
  }
  // The per-op sums are over as many instrumented steps as plainTotal sums plain ones.
  // Store-all runs every op once per micro-batch (cases/micro_batches.h): a share is one call's, as the policy's
  // counts are calls.
  const double calls = plainTotal * static_cast<double>(spec.microBatches);
  ForwardShares shares;
  for (const auto& [key, t] : steady) shares.steady[key] = calls > 0 ? t / calls : 0.0;
  for (const auto& [key, t] : untaped) shares.untaped[key] = calls > 0 ? t / calls : 0.0;
  return shares;
}

// Which forwards the schedule recomputes, with and without a tape, in one step (the same every step).
template <class T>
NodeClock policyForwardCounts(const CaseSpec& spec, const Schedule& schedule) {
  NodeClock clock;
  Chain<T> c = nodeTimedChain<T>(spec, &clock);
  executeStep(c, schedule, 0);
  return clock;
}

// What a schedule recomputes, weighed by time, each summed over calls as shares of the store-all step (the
// model's terms before their weights): its block recomputes with a tape (t_fwd), those that only advance
// (t_adv), and its op-level rebuilds of the contexts its keep masks drop (t_fwd; selective).
struct RecomputeShares {
  double taped = 0, advancing = 0, rebuilt = 0;
};

// A node the schedule's mask drops never saves a context in a block forward, so its every taped forward in the
// recompute phase is an op-level rebuild (block_runtime.h's recomputeDropped, right before the block's backward).
inline RecomputeShares recomputeShares(const ForwardShares& shares, const NodeClock& counts, const Schedule& schedule) {
  auto share = [](const std::map<NodeKey, double>& m, const NodeKey& k) {
    const auto it = m.find(k);
    return it == m.end() ? 0.0 : it->second;
  };
  RecomputeShares r;
  for (const auto& [key, count] : counts.recomputes)
    (keeps(schedule.keepFor(key.first), key.second) ? r.taped : r.rebuilt) +=
        static_cast<double>(count) * share(shares.steady, key);
  for (const auto& [key, count] : counts.recomputesUntaped)
    r.advancing += static_cast<double>(count) * share(shares.untaped, key);
  return r;
}

}  // namespace ckpt::bench
