// The time model of bench_engine's step benchmarks: a policy's time overhead predicted from the store-all step's
// own measured per-op times, next to its FLOP overhead.
//
//   predicted_time_overhead = sum over the op forwards the policy recomputes in one step (block b, node n, each
//                             as often as it is recomputed) of  t_fwd(b, n) / t_step, or t_adv(b, n) / t_step
//                             for a recompute that keeps no context (a block only advanced)
//                           + sum over its first-forward calls that keep no context (forward-phase calls with
//                             ctx == nullptr) of  (t_adv(b, n) - t_first(b, n)) / t_step
//                           + sum over its backward calls that read a context a recompute made (block recomputes
//                             and op-level rebuilds), for ops whose context store-all reads from beyond the L2
//                             cache, of  (t_bwd_fresh(b, n) - t_bwd(b, n)) / t_step
//
// t_step is the store-all reference step (reference/trainer.h) on an uninstrumented chain, CPU time of the thread
// (as BM_Step's time_overhead: on a shared machine wall time charges whatever the scheduler ran meanwhile to the
// op that happened to be running). The per-op times come from instrumented store-all steps, in which every op
// forward is called three more times on the same inputs (the same random draws; module state and parameter
// gradients put back afterwards): once to warm, once saving a context as the step does (t_fwd, an op in steady
// state, its output where a freed one was, as a recompute in the backward finds it) with its backward at once
// (t_bwd_fresh, the repeat's output as the incoming gradient), and once saving nothing (t_adv: saving writes a
// dropout mask or attention probabilities of its own). t_first(b, n) is the store-all step's own call, which pays
// for fresh pages of every activation the step keeps; the second term credits a policy for the forwards it runs
// into recycled memory because it keeps nothing from them (full recomputation's whole first forward). t_bwd(b, n)
// is the store-all step's own backward, reading a context saved a whole forward pass earlier: where more than an
// L2 cache's worth of activations was saved after the op's forward (store-all's peak less the bytes live then),
// that context comes from further out, and a backward right after a recompute finds it in cache, which the third
// term credits (elsewhere the difference is the timed repeat's own warm code, not the schedule's).
// Instrumented steps run for at least half a second: a case of microsecond ops needs hundreds of them
// before its per-op sums stop moving from run to run. Each is followed by an uninstrumented one, whose times
// sum to t_step's: the two are measured over the same stretch of time.
// The FLOP overhead weighs a recomputed op by its FLOPs; this weighs it by the time it actually took, so a Philox
// dropout or an element-wise activation counts for what it costs next to the GEMMs. What the prediction leaves
// out, the time-model tax (measured time overhead - predicted), is what the policy costs beyond re-running those
// ops: executor bookkeeping, allocation, and the cache effects of another order of work beyond the third term's
// (a policy whose whole working set fits a cache a store-all step overflows runs faster all through).
// Which forwards a policy recomputes is counted on an instrumented chain (the executor's meter is in the
// recompute phase during block recomputes and op-level rebuilds), so the executor itself is not instrumented.
#pragma once
#include <ctime>
#include <map>
#include <memory>
#include <set>
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
  std::map<NodeKey, double> firstSeconds;        // the step's own forward CPU time per op
  std::map<NodeKey, double> backSeconds;         // the step's own backward CPU time per op
  std::map<NodeKey, double> freshBackSeconds;    // backward CPU time per op right after its context was saved
  std::map<NodeKey, int64_t> recomputes;         // forward calls per op made in the recompute phase, saving a context
  std::map<NodeKey, int64_t> recomputesUntaped;  // the same, saving none
  std::map<NodeKey, int64_t> unsaved;            // forward-phase calls per op that keep no context
  std::map<NodeKey, int64_t> freshBackwards;     // backward calls per op that read a context a recompute made
  std::map<NodeKey, int64_t> liveAtForward;      // activation bytes live when the op's forward ran (store-all)
};

// Per op, as shares of the store-all step: t_fwd (steady), t_adv (untaped), t_first, t_bwd (back), t_bwd_fresh.
struct ForwardShares {
  std::map<NodeKey, double> steady, untaped, first, back, freshBack;
  std::set<NodeKey> outOfCache;  // ops whose context the store-all step reads back from beyond the L2 cache
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
    const bool recomputing = m && m->phase == Phase::kRecompute;
    if (recomputing) ++(ctx ? clock_->recomputes : clock_->recomputesUntaped)[key_];
    if (m && m->phase == Phase::kForward && !ctx) ++clock_->unsaved[key_];
    if (ctx) freshContext_ = recomputing;  // the context this op's next backward reads
    if (!clock_->measure) return this->inner().forward(in, ctx, env);
    if (m) clock_->liveAtForward[key_] = m->live();
    RngDraw draw;
    RecordingDraws recording(env.draws, &draw);
    OpEnv first = env;
    first.draws = &recording;
    const double f0 = threadCpuSeconds();
    Tensor<T> y = this->inner().forward(in, ctx, first);
    clock_->firstSeconds[key_] += threadCpuSeconds() - f0;
    NodeDraws replay(nullptr, 0, &draw, nullptr);
    OpEnv again = env;  // the same draws, and (below) the state and the gradients put back
    again.draws = &replay;
    std::vector<Mat<T>> state, grads;
    for (Buffer<T>* b : this->inner().buffers()) state.push_back(b->value);
    for (Param<T>* p : this->inner().params()) grads.push_back(p->grad);
    // Warm once, then time a call that saves a context as the step's does (a recompute with tape), its backward
    // at once, and a call that saves nothing (a recompute that only advances, or a first forward that keeps
    // nothing): saving costs writes of its own (a dropout mask, attention probabilities).
    for (int i = 0; i < 3; ++i) {
      Context<T> scratch;
      const bool save = ctx && i < 2;
      const double t0 = threadCpuSeconds();
      const Tensor<T> z = this->inner().forward(in, save ? &scratch : nullptr, again);
      const double t = threadCpuSeconds() - t0;
      if (i == 1) clock_->seconds[key_] += t;
      if (i == 2) clock_->untapedSeconds[key_] += t;
      if (save && i == 1) {
        std::vector<Tensor<T>> din(in.size());
        const double b0 = threadCpuSeconds();
        this->inner().backward(scratch, z, din);
        clock_->freshBackSeconds[key_] += threadCpuSeconds() - b0;
      }
    }
    for (size_t i = 0; i < state.size(); ++i) this->inner().buffers()[i]->value = state[i];
    for (size_t i = 0; i < grads.size(); ++i) this->inner().params()[i]->grad = grads[i];
    return y;
  }
  void backward(const Context<T>& ctx, const Tensor<T>& dout, std::span<Tensor<T>> din) override {
    if (freshContext_) ++clock_->freshBackwards[key_];
    if (!clock_->measure) return this->inner().backward(ctx, dout, din);
    const double b0 = threadCpuSeconds();
    this->inner().backward(ctx, dout, din);
    clock_->backSeconds[key_] += threadCpuSeconds() - b0;
  }

 private:
  NodeClock* clock_;
  NodeKey key_;
  bool freshContext_ = false;
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

// Per op, its times (t_fwd, t_adv, t_first, t_bwd, t_bwd_fresh) as shares of one store-all step, and which ops'
// contexts store-all reads from beyond the L2 cache.
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
  std::map<NodeKey, double> steady, untaped, first, back, freshBack;
  int64_t peak = 0;
  double plainTotal = 0;
  const double begin = threadCpuSeconds();
  for (int i = 0; i < steps + 1 || threadCpuSeconds() - begin < kMinSeconds; ++i) {
    start.restore();
    clock = NodeClock();
    clock.measure = true;
    peak = referenceStep(c, 0).peakActivationBytes;
    plainStart.restore();
    const double t0 = threadCpuSeconds();
    referenceStep(plain, 0);
    const double plainSeconds = threadCpuSeconds() - t0;
    if (i == 0) continue;  // warm-up
    for (const auto& [key, t] : clock.seconds) steady[key] += t;
    for (const auto& [key, t] : clock.untapedSeconds) untaped[key] += t;
    for (const auto& [key, t] : clock.firstSeconds) first[key] += t;
    for (const auto& [key, t] : clock.backSeconds) back[key] += t;
    for (const auto& [key, t] : clock.freshBackSeconds) freshBack[key] += t;
    plainTotal += plainSeconds;
  }
  // The per-op sums are over as many instrumented steps as plainTotal sums plain ones.
  // Store-all runs every op once per micro-batch (cases/micro_batches.h): a share is one call's, as the policy's
  // counts are calls.
  const double calls = plainTotal * static_cast<double>(spec.microBatches);
  ForwardShares shares;
  for (const auto& [key, t] : steady) shares.steady[key] = calls > 0 ? t / calls : 0.0;
  for (const auto& [key, t] : untaped) shares.untaped[key] = calls > 0 ? t / calls : 0.0;
  for (const auto& [key, t] : first) shares.first[key] = calls > 0 ? t / calls : 0.0;
  for (const auto& [key, t] : back) shares.back[key] = calls > 0 ? t / calls : 0.0;
  for (const auto& [key, t] : freshBack) shares.freshBack[key] = calls > 0 ? t / calls : 0.0;
  // What store-all saves after an op's forward (its peak, at the loss, less what was live then) is written
  // between the op's save and its backward's read: more than the L2 cache holds, and the context is read back
  // from further out.
  const int64_t l2 = static_cast<int64_t>(Eigen::l2CacheSize());
  for (const auto& [key, live] : clock.liveAtForward)
    if (peak - live > l2) shares.outOfCache.insert(key);
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
  for (const auto& [key, count] : counts.recomputesUntaped)
    p += static_cast<double>(count) * share(shares.untaped, key);
  for (const auto& [key, count] : counts.unsaved)
    p += static_cast<double>(count) * (share(shares.untaped, key) - share(shares.first, key));
  for (const auto& [key, count] : counts.freshBackwards)
    if (shares.outOfCache.count(key))
      p += static_cast<double>(count) * (share(shares.freshBack, key) - share(shares.back, key));
  return p;
}

}  // namespace ckpt::bench
