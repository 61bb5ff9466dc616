// bench_engine: what each checkpointing policy costs, as Google Benchmark runs (reports/ reads the JSON).
//
//   BM_Step/<case>/<policy>       one training step of a catalogue case under a policy (executor.h, default
//                                 engine), timed interleaved with the reference store-all step; the policies are
//                                 defaultPolicies() and full recomputation (uniform:k=L)
//   BM_Planner/<policy>/<layers>  the planner alone (schedule + plan) on a homogeneous chain of L blocks of the
//                                 mlp-deep case's first block, L = 10 .. 10^5
//   BM_Frontier/<case>/<budget>   the optimal policy's plan at a budget: geometric budgets from the smallest
//                                 feasible to store-all's peak, plus every BM_Step policy's own peak
// bench/README.md lists the counters; reports/make_report.py reads them.
//
// Time overhead. A sample is one reference step and one policy step back to back (several of each for steps
// shorter than Mode::sampleSeconds), in alternating order, each from the same starting weights (both chains are
// put back before every step, outside the timed region, so every step does the same work); time_overhead is the
// median over samples of (policy time / reference time). Drift (frequency, other load) moves both halves of a
// sample alike and cancels in the ratio; the median drops samples a burst of other work hit. Steps are timed in
// CPU time of the benchmarking thread (wall time too, as *_wall counters): on a machine shared with other work
// a step's wall time counts whatever the scheduler ran meanwhile, which swamps a 3% effect. The baseline is the
// reference trainer (reference/trainer.h), the plain store-everything step a user compares against, so the
// store-all row's engine tax is the executor's own fixed cost. The counters are the measured step's (the
// executor's meter); planned_equals_measured says they equal the planner's, bitwise_equal that the step's loss,
// gradients and state equal the reference's bit for bit (`ckptcheck verify` checks every step and property).
//
// Flags (before Google Benchmark's own):
//   --ckpt_mode=short|full   short: the main job's run (whole suite in well under 3 minutes); full: careful runs
//   --ckpt_catalog=DIR       the catalogue (default $CKPT_SOURCE_DIR/cases/catalog, else this source tree's)
#include <benchmark/benchmark.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "cases/case_json.h"
#include "harness/build_info.h"
#include "harness/compare.h"
#include "harness/dtype_dispatch.h"
#include "harness/engine/executor.h"
#include "harness/engine/plan.h"
#include "harness/engine/policy.h"
#include "reference/trainer.h"

namespace ckpt::bench {
namespace {

struct Mode {
  std::string name;
  double stepBudget;         // BM_Step: seconds of sampling per case x policy, once minSamples are in
  int minSamples;            // BM_Step: at least this many interleaved samples
  int maxSamples;            // BM_Step: at most this many
  double sampleSeconds;      // a sample repeats steps until its reference half is at least this long
  double plannerMinTime;     // per BM_Planner benchmark
  int64_t optimalMaxLayers;  // the optimal DP is O(L^2 J) on a homogeneous chain: planned up to this L
  int frontierPoints;        // geometric budgets per case (plus every policy's own peak)
};

const Mode kShort{"short", 1.0, 7, 400, 0.002, 0.02, 1000, 24};
const Mode kFull{"full", 8.0, 21, 4000, 0.005, 0.2, 3000, 60};

using Clock = std::chrono::steady_clock;

double seconds(Clock::time_point a, Clock::time_point b) { return std::chrono::duration<double>(b - a).count(); }

// CPU time of the calling thread: what a step costs, whether or not the scheduler ran other work in between
// (wall time on a shared machine counts the time slices other processes got).
double threadCpuSeconds() {
  timespec ts{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + 1e-9 * static_cast<double>(ts.tv_nsec);
}

struct Elapsed {
  double wall = 0;
  double cpu = 0;
  Elapsed& operator+=(const Elapsed& o) {
    wall += o.wall;
    cpu += o.cpu;
    return *this;
  }
};

class Stopwatch {
 public:
  Stopwatch() : wall_(Clock::now()), cpu_(threadCpuSeconds()) {}
  Elapsed elapsed() const { return {seconds(wall_, Clock::now()), threadCpuSeconds() - cpu_}; }

 private:
  Clock::time_point wall_;
  double cpu_;
};

double median(std::vector<double> v) {
  if (v.empty()) return 0.0;
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

// Linear-interpolated quantile q in [0, 1].
double quantile(std::vector<double> v, double q) {
  if (v.empty()) return 0.0;
  std::sort(v.begin(), v.end());
  const double pos = q * static_cast<double>(v.size() - 1);
  const size_t lo = static_cast<size_t>(std::floor(pos));
  const size_t hi = std::min(lo + 1, v.size() - 1);
  return v[lo] + (pos - static_cast<double>(lo)) * (v[hi] - v[lo]);
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
class TimedOp final : public Op<T> {
 public:
  TimedOp(std::unique_ptr<Op<T>> inner, RecomputeClock* clock) : inner_(std::move(inner)), clock_(clock), kind_(inner_->kind()) {}
  std::string kind() const override { return kind_; }
  OpMeta meta(std::span<const Shape> in) const override { return inner_->meta(in); }
  Tensor<T> forward(std::span<const Tensor<T>> in, Context<T>* ctx, const OpEnv& env) override {
    const ActivationMeter* m = currentMeter();
    if (!m || m->phase != Phase::kRecompute) return inner_->forward(in, ctx, env);
    const auto t0 = Clock::now();
    Tensor<T> y = inner_->forward(in, ctx, env);
    clock_->seconds[kind_] += seconds(t0, Clock::now());
    std::vector<Shape> shapes;
    for (const auto& t : in) shapes.push_back({t.rows(), t.cols()});
    clock_->flops[kind_] += inner_->meta(shapes).forwardFlops;
    return y;
  }
  void backward(const Context<T>& ctx, const Tensor<T>& dout, std::span<Tensor<T>> din) override {
    inner_->backward(ctx, dout, din);
  }
  std::vector<Param<T>*> params() override { return inner_->params(); }
  std::vector<Buffer<T>*> buffers() override { return inner_->buffers(); }

 private:
  std::unique_ptr<Op<T>> inner_;
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

template <class T>
void stepBenchmark(benchmark::State& state, const Mode& mode, const CaseSpec& spec, const std::string& policyText) {
  const ChainCost cost = caseChainCost(spec);
  const Schedule schedule = makeSchedule(parsePolicy(policyText), cost);
  const Plan plan = planSchedule(schedule, cost);  // validates the schedule
  Chain<T> ref = buildChain<T>(spec);
  Chain<T> eng = buildChain<T>(spec);
  ChainSnapshot<T> refStart(ref), engStart(eng);

  StepResult<T> refResult, engResult;
  auto timeRef = [&] {
    refStart.restore();
    const Stopwatch w;
    refResult = referenceStep(ref, 0);
    return w.elapsed();
  };
  auto timeEng = [&] {
    engStart.restore();
    const Stopwatch w;
    engResult = executeStep(eng, schedule, 0);
    return w.elapsed();
  };

  // Warm up (first-touch allocations, caches) and size a sample: enough steps that its reference half is at
  // least mode.sampleSeconds, so the clocks' resolution and call overhead do not matter.
  double warm = 0;
  for (int i = 0; i < 3; ++i) {
    warm = timeRef().cpu;
    timeEng();
  }
  const int stepsPerSample = std::max(1, static_cast<int>(std::ceil(mode.sampleSeconds / std::max(warm, 1e-7))));

  // Samples until both the minimum count and the time budget are reached (one Google Benchmark iteration holds
  // them all; its manual time is the median policy step, CPU time).
  std::vector<double> ratios, wallRatios, engStep, refStep, engWall, refWall;
  bool engFirst = false;
  for (auto _ : state) {
    const auto start = Clock::now();
    while (static_cast<int>(ratios.size()) < mode.maxSamples &&
           (static_cast<int>(ratios.size()) < mode.minSamples || seconds(start, Clock::now()) < mode.stepBudget)) {
      Elapsed tr, te;
      for (int k = 0; k < stepsPerSample; ++k) {
        if (engFirst) {
          te += timeEng();
          tr += timeRef();
        } else {
          tr += timeRef();
          te += timeEng();
        }
        engFirst = !engFirst;
      }
      ratios.push_back(te.cpu / tr.cpu);
      wallRatios.push_back(te.wall / tr.wall);
      engStep.push_back(te.cpu / stepsPerSample);
      refStep.push_back(tr.cpu / stepsPerSample);
      engWall.push_back(te.wall / stepsPerSample);
      refWall.push_back(tr.wall / stepsPerSample);
    }
    state.SetIterationTime(median(engStep));
  }

  // Both last ran step 0 from the same weights: their results must be bitwise equal (verify checks every step).
  const bool bitwise = compareSteps(std::vector<StepResult<T>>{refResult}, std::vector<StepResult<T>>{engResult}).bitwiseEqual;
  const FlopCounts& f = engResult.flops;
  const bool planned = engResult.peakActivationBytes == plan.peakActivationBytes &&
                       engResult.forwardEvals == plan.forwardEvals && f == plan.flops;
  const double base = static_cast<double>(f.forward + f.backward);
  auto& c = state.counters;
  c["layers"] = cost.layers();
  c["peak_activation_bytes"] = static_cast<double>(engResult.peakActivationBytes);
  c["store_all_peak_activation_bytes"] = static_cast<double>(refResult.peakActivationBytes);
  c["forward_evals"] = static_cast<double>(engResult.forwardEvals);
  c["flops_forward"] = static_cast<double>(f.forward);
  c["flops_recompute"] = static_cast<double>(f.recompute);
  c["flops_backward"] = static_cast<double>(f.backward);
  c["flop_overhead"] = base > 0 ? static_cast<double>(f.recompute) / base : 0.0;
  c["planned_equals_measured"] = planned ? 1 : 0;
  c["bitwise_equal"] = bitwise ? 1 : 0;
  c["time_overhead"] = median(ratios);
  c["time_overhead_q1"] = quantile(ratios, 0.25);
  c["time_overhead_q3"] = quantile(ratios, 0.75);
  c["step_seconds"] = median(engStep);
  c["store_all_step_seconds"] = median(refStep);
  // Where the recompute time goes (see RecomputeClock).
  const RecomputeProfile prof = profileRecompute<T>(spec, schedule, std::max(5, 3 * stepsPerSample));
  c["recompute_time_share"] = prof.share;
  for (const auto& [kind, t] : prof.kindShare) {
    // Per op kind: its recompute time as a share of the policy's step, its recompute FLOPs as a share of the
    // store-all step's forward + backward FLOPs (these sum to flop_overhead).
    c["recompute_time_share." + kind] = t;
    c["recompute_flop_share." + kind] = base > 0 ? static_cast<double>(prof.kindFlops.at(kind)) / base : 0.0;
  }
  c["time_overhead_wall"] = median(wallRatios);
  c["step_wall_seconds"] = median(engWall);
  c["store_all_step_wall_seconds"] = median(refWall);
  c["samples"] = static_cast<double>(ratios.size());
  c["steps_per_sample"] = stepsPerSample;
  state.SetLabel(spec.name + " " + schedule.policy);
}

// The policies defaultPolicies() (policy.cpp) gives a homogeneous chain of L blocks, optimal left out: its
// default budget needs the least-peak DP, O(L^2) on such a chain, which is out of reach at 10^5 blocks. main()
// checks this list against defaultPolicies() on a short chain, so the two cannot drift apart unnoticed.
std::vector<std::string> plannerPoliciesWithoutOptimal(int64_t layers) {
  const int slots = std::max(2, static_cast<int>(std::lround(std::sqrt(static_cast<double>(layers)))));
  return {"store-all", "uniform", "recursive", "revolve:slots=" + std::to_string(slots), "selective",
          "uniform+selective"};
}

std::string family(const std::string& policy) { return policy.substr(0, policy.find(':')); }

void plannerBenchmark(benchmark::State& state, const ChainCost& cost, const std::string& policyText) {
  const PolicySpec policy = parsePolicy(policyText);
  Plan plan;
  std::string text;
  for (auto _ : state) {
    const Schedule s = makeSchedule(policy, cost);
    plan = planSchedule(s, cost);
    benchmark::DoNotOptimize(plan.peakActivationBytes);
    text = s.policy;
  }
  auto& c = state.counters;
  c["layers"] = cost.layers();
  c["peak_activation_bytes"] = static_cast<double>(plan.peakActivationBytes);
  c["forward_evals"] = static_cast<double>(plan.forwardEvals);
  c["flops_forward"] = static_cast<double>(plan.flops.forward);
  c["flops_recompute"] = static_cast<double>(plan.flops.recompute);
  c["flops_backward"] = static_cast<double>(plan.flops.backward);
  c["flop_overhead"] = plan.flopOverhead();
  c["largest_block_bytes"] = static_cast<double>(cost.block(0).inBytes);
  state.SetLabel(text);
}

void frontierBenchmark(benchmark::State& state, const CaseSpec& spec, const ChainCost& cost, int64_t budget,
                       int64_t least, int64_t full) {
  const PolicySpec policy = parsePolicy("optimal:budget=" + std::to_string(budget));
  Plan plan;
  std::string text;
  for (auto _ : state) {
    const Schedule s = makeSchedule(policy, cost);
    plan = planSchedule(s, cost);
    benchmark::DoNotOptimize(plan.peakActivationBytes);
    text = s.policy;
  }
  auto& c = state.counters;
  c["layers"] = cost.layers();
  c["budget_bytes"] = static_cast<double>(budget);
  c["least_budget_bytes"] = static_cast<double>(least);
  c["store_all_peak_activation_bytes"] = static_cast<double>(full);
  c["peak_activation_bytes"] = static_cast<double>(plan.peakActivationBytes);
  c["forward_evals"] = static_cast<double>(plan.forwardEvals);
  c["flops_forward"] = static_cast<double>(plan.flops.forward);
  c["flops_recompute"] = static_cast<double>(plan.flops.recompute);
  c["flops_backward"] = static_cast<double>(plan.flops.backward);
  c["flop_overhead"] = plan.flopOverhead();
  state.SetLabel(spec.name + " " + text);
}

// Budgets from the smallest feasible to store-all's peak, geometrically spaced (the frontier bends most near
// the smallest budgets), both ends included, no repeats.
std::vector<int64_t> frontierBudgets(int64_t least, int64_t full, int points) {
  std::vector<int64_t> b;
  if (full <= least || points < 2) return {std::max(least, full)};
  const double ratio = static_cast<double>(full) / static_cast<double>(least);
  for (int i = 0; i < points; ++i) {
    const double f = static_cast<double>(i) / (points - 1);
    const int64_t v = i == points - 1 ? full : static_cast<int64_t>(std::llround(static_cast<double>(least) * std::pow(ratio, f)));
    if (b.empty() || v > b.back()) b.push_back(std::min(v, full));
  }
  return b;
}

std::string cpuModel() {
  std::ifstream in("/proc/cpuinfo");
  std::string line;
  while (std::getline(in, line))
    if (line.rfind("model name", 0) == 0) {
      const size_t colon = line.find(':');
      if (colon != std::string::npos) return line.substr(line.find_first_not_of(' ', colon + 1));
    }
  return "unknown";
}

std::filesystem::path defaultCatalog() {
  if (const char* root = std::getenv("CKPT_SOURCE_DIR"); root && *root) return std::filesystem::path(root) / "cases" / "catalog";
  return std::filesystem::path(CKPT_BENCH_SOURCE_DIR) / "cases" / "catalog";
}

std::vector<CaseSpec> loadCatalog(const std::filesystem::path& dir) {
  std::vector<std::filesystem::path> files;
  for (const auto& e : std::filesystem::directory_iterator(dir))
    if (e.path().extension() == ".json") files.push_back(e.path());
  std::sort(files.begin(), files.end());
  std::vector<CaseSpec> cases;
  for (const auto& f : files) cases.push_back(loadCase(f.string()));
  return cases;
}

// The block the planner-scaling chains repeat: the catalogue's mlp-deep block (its first), else the first case's.
CaseSpec scalingSpec(const std::vector<CaseSpec>& cases) {
  for (const auto& c : cases)
    if (c.name == "mlp-deep") return c;
  return cases.front();
}

// Every policy of defaultPolicies() plus full recomputation: a checkpoint at every block boundary and every
// block recomputed once (uniform with one block per segment; Megatron's "full" recompute, PyTorch's checkpoint
// around every layer), the policy the textbook 33% refers to.
std::vector<std::string> stepPolicies(const ChainCost& cost) {
  std::vector<std::string> ps = defaultPolicies(cost);
  const std::string full = "uniform:k=" + std::to_string(cost.layers());
  if (std::find(ps.begin(), ps.end(), full) == ps.end()) ps.push_back(full);
  return ps;
}

void registerAll(const Mode& mode, const std::vector<CaseSpec>& cases) {
  for (const CaseSpec& spec : cases) {
    const ChainCost cost = caseChainCost(spec);
    for (const std::string& policy : stepPolicies(cost)) {
      benchmark::RegisterBenchmark(("BM_Step/" + spec.name + "/" + policy).c_str(),
                                   [&mode, spec, policy](benchmark::State& st) {
                                     withScalar(spec.dtype, [&](auto t) { stepBenchmark<decltype(t)>(st, mode, spec, policy); });
                                   })
          ->UseManualTime()
          ->Iterations(1)
          ->Unit(benchmark::kMicrosecond);
    }
  }

  const CaseSpec base = scalingSpec(cases);
  for (int64_t layers : {10, 30, 100, 300, 1000, 3000, 10000, 30000, 100000}) {
    auto cost = std::make_shared<ChainCost>(homogeneousChainCost(base, layers));
    std::vector<std::string> policies = plannerPoliciesWithoutOptimal(layers);
    if (layers <= mode.optimalMaxLayers)
      for (const auto& p : defaultPolicies(*cost))
        if (family(p) == "optimal") policies.push_back(p);
    for (const std::string& policy : policies)
      benchmark::RegisterBenchmark(("BM_Planner/" + family(policy) + "/" + std::to_string(layers)).c_str(),
                                   [cost, policy](benchmark::State& st) { plannerBenchmark(st, *cost, policy); })
          ->MinTime(mode.plannerMinTime)
          ->Unit(benchmark::kMillisecond);
  }

  for (const CaseSpec& spec : cases) {
    auto cost = std::make_shared<ChainCost>(caseChainCost(spec));
    const int64_t full = planSchedule(storeAllSchedule(*cost), *cost).peakActivationBytes;
    const int64_t least = std::min(full, optimalMinBudget(*cost));
    // Geometric budgets, and every step policy's own peak, so the report can say exactly whether a policy is on
    // the frontier (optimal at its peak recomputes no less).
    std::vector<int64_t> budgets = frontierBudgets(least, full, mode.frontierPoints);
    for (const std::string& policy : stepPolicies(*cost)) {
      const int64_t peak = planSchedule(makeSchedule(parsePolicy(policy), *cost), *cost).peakActivationBytes;
      if (peak >= least) budgets.push_back(peak);
    }
    std::sort(budgets.begin(), budgets.end());
    budgets.erase(std::unique(budgets.begin(), budgets.end()), budgets.end());
    for (const int64_t b : budgets)
      benchmark::RegisterBenchmark(("BM_Frontier/" + spec.name + "/" + std::to_string(b)).c_str(),
                                   [cost, spec, b, least, full](benchmark::State& st) {
                                     frontierBenchmark(st, spec, *cost, b, least, full);
                                   })
          ->Iterations(1)
          ->Unit(benchmark::kMillisecond);
  }
}

}  // namespace
}  // namespace ckpt::bench

int main(int argc, char** argv) {
  using namespace ckpt::bench;
  const Mode* mode = &kShort;
  std::filesystem::path catalog = defaultCatalog();
  // Our flags first; Google Benchmark sees the rest.
  int kept = 1;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--ckpt_mode=short") mode = &kShort;
    else if (a == "--ckpt_mode=full") mode = &kFull;
    else if (a.rfind("--ckpt_mode=", 0) == 0) {
      std::cerr << "bench_engine: --ckpt_mode must be short or full (got '" << a.substr(12) << "')\n";
      return 2;
    } else if (a.rfind("--ckpt_catalog=", 0) == 0) catalog = a.substr(15);
    else argv[kept++] = argv[i];
  }
  argc = kept;
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 2;
  try {
    const auto cases = loadCatalog(catalog);
    if (cases.empty()) {
      std::cerr << "bench_engine: no cases in " << catalog << "\n";
      return 2;
    }
    // The large-L policy list must be defaultPolicies() without optimal.
    {
      const auto cost = ckpt::homogeneousChainCost(scalingSpec(cases), 100);
      std::vector<std::string> want;
      for (const auto& p : ckpt::defaultPolicies(cost))
        if (family(p) != "optimal") want.push_back(p);
      if (want != plannerPoliciesWithoutOptimal(100)) {
        std::cerr << "bench_engine: plannerPoliciesWithoutOptimal() no longer matches defaultPolicies()\n";
        return 3;
      }
    }
    benchmark::AddCustomContext("ckpt_mode", mode->name);
    benchmark::AddCustomContext("git_commit", ckpt::kGitCommit);
    benchmark::AddCustomContext("compiler", ckpt::kCompiler);
    benchmark::AddCustomContext("build_type", ckpt::kBuildType);
    benchmark::AddCustomContext("cpu", cpuModel());
    benchmark::AddCustomContext("ckptcheck_version", ckpt::kVersion);
    registerAll(*mode, cases);
    benchmark::RunSpecifiedBenchmarks();
  } catch (const ckpt::InputError& e) {
    std::cerr << "bench_engine: " << e.what() << "\n";
    return 2;
  } catch (const std::exception& e) {
    std::cerr << "bench_engine: " << e.what() << "\n";
    return 3;
  }
  benchmark::Shutdown();
  return 0;
}
