// The time model of bench_engine's step benchmarks: a policy's time overhead predicted from two instrumented
// calibration schedules of the case, measured once per case in the benchmark's own process, next to its FLOP
// overhead.
//
// Every op call of a step falls in one of six classes (CallClass): a first forward that saves a context or keeps
// none, a recompute that saves a context or keeps none (a block only advanced), a backward that reads a context
// saved in the first forward ("stale": written a whole forward pass earlier) or one a recompute just made
// ("fresh"). What a call costs depends on its class as much as on the op: a first forward that keeps nothing runs
// in recycled memory, a backward right after the recompute that made its context finds it in cache where
// store-all's reads it from beyond the L2 cache. So the model times each op in each class where a schedule
// actually runs it, in situ, rather than repeating it in isolation:
//
//   store-all          every op: first forward saving a context, stale backward;
//   full recompute     (uniform:k=L, each block its own segment): every op but the last block's: first forward
//                      keeping nothing, recompute saving a context, fresh backward;
//
// instrumented steps of the two in turn (the same stretch of time for both), each op call clocked (steady_clock,
// a vDSO read of tens of ns; the thread's CPU clock is a system call, and two per call made a step of
// microsecond ops half again as long), per op and class the mean over the steps of its per-step sum. Only steps
// the scheduler left alone count (wall time within 1% of the thread's CPU time; every step, where a loaded
// machine left too few alone in 3 s). Besides the ops, each step spends time in the executor itself
// (bookkeeping, the step's own allocations, the update): `outside` = the step's time less its op calls', mean
// over steps, per schedule.
//
//   predicted policy step   = sum over its op calls (block b, node n, class c; counted on an instrumented run of
//                             the policy's schedule) of  t(b, n, c)
//                           + outside(store-all) + (outside(full) - outside(store-all)) * its recompute calls
//                                                                                       / full's recompute calls
//   predicted_time_overhead = predicted policy step / predicted store-all step - 1
//
// where t(b, n, c) is the calibration schedule's per-call time of that op in that class (a recompute that keeps
// nothing: the op's first forward that keeps nothing; a class neither schedule ran for that op, such as the last
// block's recompute: the nearest class store-all ran, its saved forward or stale backward). The store-all policy
// is predicted at 0 exactly; full recomputation is the calibration schedule itself, so its prediction is a
// measurement (of instrumented steps, taken before its own timed steps); every other policy (uniform with
// segments of several blocks, recursive, revolve, optimal, selective and its compositions) is a prediction.
// What the prediction leaves out, the time-model tax (measured time overhead - predicted), is what a policy costs
// beyond its calls' classes: a stored block's stale backward that finds its context in cache because the policy
// keeps less than store-all, an op rebuilt alone (selective) whose neighbours' cache state differs from a block
// recompute's, per-call executor costs other than recomputes'.
#pragma once
#include <algorithm>
#include <array>
#include <cmath>
#include <chrono>
#include <ctime>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "bench/recompute_profile.h"
#include "harness/engine/chain_cost.h"
#include "harness/engine/policy.h"

namespace ckpt::bench {

using NodeKey = std::pair<int, int>;  // (block, node)

// CPU time of the calling thread (a system call, a few hundred ns: small next to any op of a benchmarked case).
inline double threadCpuSeconds() {
  timespec ts{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + 1e-9 * static_cast<double>(ts.tv_nsec);
}

enum CallClass : int {
  kForwardSaved,      // first forward (forward phase) saving a context
  kForwardUnsaved,    // first forward keeping none (its block, or the op, is recomputed in the backward)
  kRecomputeSaved,    // recompute phase, saving a context (a block recompute or an op-level rebuild)
  kRecomputeUnsaved,  // recompute phase, keeping none (recursive and revolve advancing through a block)
  kBackwardStale,     // backward reading a context the first forward saved
  kBackwardFresh,     // backward reading a context a recompute made
  kCallClasses
};

using PerClass = std::array<double, kCallClasses>;
using CallCounts = std::map<NodeKey, std::array<int64_t, kCallClasses>>;  // per op, calls of each class in one step

inline double mean(const std::vector<double>& v) {
  double s = 0;
  for (double x : v) s += x;
  return v.empty() ? 0.0 : s / static_cast<double>(v.size());
}

inline int64_t recomputeCalls(const CallCounts& counts) {
  int64_t n = 0;
  for (const auto& [key, c] : counts) n += c[kRecomputeSaved] + c[kRecomputeUnsaved];
  return n;
}

// What the instrumented ops write: the calls of each class per op and, when measuring, their seconds.
struct CallClock {
  bool measure = false;
  CallCounts calls;
  std::map<NodeKey, PerClass> seconds;
  double opSeconds = 0;  // all op calls'
};

template <class T>
class ClassedOp final : public ForwardingOp<T> {
 public:
  ClassedOp(std::unique_ptr<Op<T>> inner, CallClock* clock, NodeKey key)
      : ForwardingOp<T>(std::move(inner)), clock_(clock), key_(key) {}
  Tensor<T> forward(std::span<const Tensor<T>> in, Context<T>* ctx, const OpEnv& env) override {
    const ActivationMeter* m = currentMeter();
    const bool recomputing = m && m->phase == Phase::kRecompute;
    if (ctx) freshContext_ = recomputing;  // the context this op's next backward reads
    const CallClass c =
        recomputing ? (ctx ? kRecomputeSaved : kRecomputeUnsaved) : (ctx ? kForwardSaved : kForwardUnsaved);
    if (!clock_->measure) {
      ++clock_->calls[key_][c];
      return this->inner().forward(in, ctx, env);
    }
    const auto t0 = Clock::now();
    Tensor<T> y = this->inner().forward(in, ctx, env);
    note(c, seconds(t0, Clock::now()));
    return y;
  }
  void backward(const Context<T>& ctx, const Tensor<T>& dout, std::span<Tensor<T>> din) override {
    const CallClass c = freshContext_ ? kBackwardFresh : kBackwardStale;
    if (!clock_->measure) {
      ++clock_->calls[key_][c];
      return this->inner().backward(ctx, dout, din);
    }
    const auto t0 = Clock::now();
    this->inner().backward(ctx, dout, din);
    note(c, seconds(t0, Clock::now()));
  }

 private:
  void note(CallClass c, double s) {
    ++clock_->calls[key_][c];
    clock_->seconds[key_][c] += s;
    clock_->opSeconds += s;
  }
  CallClock* clock_;
  NodeKey key_;
  bool freshContext_ = false;
};

template <class T>
Chain<T> classedChain(const CaseSpec& spec, CallClock* clock) {
  Chain<T> c = buildChain<T>(spec);
  for (size_t b = 0; b < c.blocks.size(); ++b)
    for (size_t n = 0; n < c.blocks[b].nodes.size(); ++n) {
      auto& node = c.blocks[b].nodes[n];
      const NodeKey key{static_cast<int>(b), static_cast<int>(n)};
      node.op = std::make_unique<ClassedOp<T>>(std::move(node.op), clock, key);
    }
  return c;
}

// One calibration schedule's per-step figures: per op and class the per-call seconds (NaN: no such call), the
// step's time outside its op calls, its whole step, and its recompute calls.
struct ScheduleTimes {
  std::map<NodeKey, PerClass> perCall;
  double outside = 0;
  double step = 0;
  int64_t recomputes = 0;
};

struct CallTimes {
  ScheduleTimes storeAll, full;
};

// Means over steps of per-step samples, per op and class, as per-call seconds. Means, not medians: the parts'
// means add up to the step's mean, where the medians of a step's hundred parts added up to less than its median
// (each part's spread is skewed up), and more so for the schedule with more calls. The steps the scheduler
// interrupted are left out before (calibrateTimeModel).
class StepSamples {
 public:
  void add(const CallClock& clock, double step) {
    for (const auto& [key, s] : clock.seconds)
      for (int c = 0; c < kCallClasses; ++c)
        if (clock.calls.at(key)[c] > 0) {
          perStep_[key][c].push_back(s[c]);
          calls_[key][c] = clock.calls.at(key)[c];
        }
    outside_.push_back(step - clock.opSeconds);
    step_.push_back(step);
    recomputes_ = recomputeCalls(clock.calls);
  }
  int size() const { return static_cast<int>(step_.size()); }
  ScheduleTimes times() const {
    ScheduleTimes t;
    for (const auto& [key, byClass] : perStep_) {
      PerClass& p = t.perCall[key];
      p.fill(std::nan(""));
      for (const auto& [c, v] : byClass) p[c] = mean(v) / static_cast<double>(calls_.at(key).at(c));
    }
    t.outside = mean(outside_);
    t.step = mean(step_);
    t.recomputes = recomputes_;
    return t;
  }

 private:
  std::map<NodeKey, std::map<int, std::vector<double>>> perStep_;
  std::map<NodeKey, std::map<int, int64_t>> calls_;
  std::vector<double> outside_, step_;
  int64_t recomputes_ = 0;
};

// Full recomputation: every block its own segment, recomputed once in the backward (the schedule the
// recompute-side classes are timed on).
inline Schedule fullRecomputeSchedule(const ChainCost& cost) {
  return makeSchedule(parsePolicy("uniform:k=" + std::to_string(cost.layers())), cost);
}

// The two calibration schedules' times: at least `steps` instrumented steps of each after one to warm up, and at
// least kMinSeconds of them, one of each in turn, which goes first alternating, as BM_Step alternates the
// reference and the policy (a case of microsecond ops needs hundreds of steps before its per-op means stop
// moving; a shared machine's speed drifts over a second, which alternating cancels). Only the two chains step in
// turn, as BM_Step's two: with a third chain's steps between them, gpt-tiny's full recomputation measured 1.30
// times store-all's step against 1.15 with two, each chain finding less of its own data in the caches.
template <class T>
CallTimes calibrateTimeModel(const CaseSpec& spec, int steps) {
  constexpr double kMinSeconds = 0.5, kMaxSeconds = 3.0;
  const ChainCost cost = caseChainCost(spec);
  const Schedule schedules[2] = {storeAllSchedule(cost), fullRecomputeSchedule(cost)};
  CallClock clocks[2];
  Chain<T> chains[2] = {classedChain<T>(spec, &clocks[0]), classedChain<T>(spec, &clocks[1])};
  ChainSnapshot<T> starts[2] = {ChainSnapshot<T>(chains[0]), ChainSnapshot<T>(chains[1])};
  // A step's wall time, and whether the scheduler left it alone: its wall time within 1% (and 20 us) of its CPU
  // time.
  auto instrumented = [&](int s, bool& alone) {
    starts[s].restore();
    clocks[s] = CallClock();
    clocks[s].measure = true;
    const double c0 = threadCpuSeconds();
    const auto t0 = Clock::now();
    executeStep(chains[s], schedules[s], 0);
    const double wall = seconds(t0, Clock::now()), cpu = threadCpuSeconds() - c0;
    alone = wall - cpu < std::max(2e-5, 0.01 * wall);
    return wall;
  };
  StepSamples samples[2], all[2];
  const double begin = threadCpuSeconds();
  for (int i = 0; i < steps + 1 || threadCpuSeconds() - begin < kMinSeconds ||
                  (std::min(samples[0].size(), samples[1].size()) < steps && threadCpuSeconds() - begin < kMaxSeconds);
       ++i)
    for (int k = 0; k < 2; ++k) {
      const int s = i % 2 ? 1 - k : k;
      bool alone = false;
      const double step = instrumented(s, alone);
      if (i == 0) continue;  // warm-up
      all[s].add(clocks[s], step);
      if (alone) samples[s].add(clocks[s], step);
    }
  // On a machine so loaded that hardly a step ran alone, every step's (interruptions and all).
  for (int s = 0; s < 2; ++s)
    if (samples[s].size() < steps) samples[s] = all[s];
  return {samples[0].times(), samples[1].times()};
}

// Which op calls of each class the schedule makes in one step (the same every step), on an instrumented chain
// that only counts.
template <class T>
CallCounts policyCallCounts(const CaseSpec& spec, const Schedule& schedule) {
  CallClock clock;
  Chain<T> c = classedChain<T>(spec, &clock);
  executeStep(c, schedule, 0);
  return clock.calls;
}

// Per-call seconds of an op in a class: full recomputation's for the classes it runs, store-all's for the rest;
// a class neither ran for this op, the nearest one store-all ran (a forward's, a backward's).
inline double callSeconds(const CallTimes& t, const NodeKey& key, int c) {
  auto at = [&](const ScheduleTimes& s, int cls) {
    const auto it = s.perCall.find(key);
    return it == s.perCall.end() ? std::nan("") : it->second[static_cast<size_t>(cls)];
  };
  auto firstKnown = [](std::initializer_list<double> v) {
    for (double x : v)
      if (!std::isnan(x)) return x;
    return 0.0;
  };
  switch (c) {
    case kForwardSaved:
      return firstKnown({at(t.storeAll, kForwardSaved), at(t.full, kForwardSaved)});
    case kForwardUnsaved:
      return firstKnown({at(t.full, kForwardUnsaved), at(t.storeAll, kForwardSaved)});
    case kRecomputeSaved:
      return firstKnown({at(t.full, kRecomputeSaved), at(t.storeAll, kForwardSaved)});
    case kRecomputeUnsaved:
      return firstKnown({at(t.full, kForwardUnsaved), at(t.full, kRecomputeSaved), at(t.storeAll, kForwardSaved)});
    case kBackwardStale:
      return firstKnown({at(t.storeAll, kBackwardStale), at(t.full, kBackwardStale)});
    default:
      return firstKnown({at(t.full, kBackwardFresh), at(t.storeAll, kBackwardStale)});
  }
}

// The predicted step seconds of a schedule that makes `counts` calls (see the top of this file).
inline double predictStepSeconds(const CallTimes& t, const CallCounts& counts) {
  double s = t.storeAll.outside;
  if (t.full.recomputes > 0)
    s += (t.full.outside - t.storeAll.outside) * static_cast<double>(recomputeCalls(counts)) /
         static_cast<double>(t.full.recomputes);
  for (const auto& [key, c] : counts)
    for (int cls = 0; cls < kCallClasses; ++cls)
      if (c[static_cast<size_t>(cls)] > 0)
        s += static_cast<double>(c[static_cast<size_t>(cls)]) * callSeconds(t, key, cls);
  return s;
}

inline double predictTimeOverhead(const CallTimes& t, const CallCounts& storeAll, const CallCounts& policy) {
  const double base = predictStepSeconds(t, storeAll);
  return base > 0 ? predictStepSeconds(t, policy) / base - 1.0 : 0.0;
}

}  // namespace ckpt::bench
