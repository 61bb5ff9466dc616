// bench_engine: what each checkpointing policy costs, as Google Benchmark runs (reports/ reads the JSON).
//
//   BM_Step/<case>/<policy>                one training step of a catalogue case under a policy (executor.h,
//                                          default engine), interleaved with the reference store-all step; the
//                                          policies are defaultPolicies() and full recomputation (uniform:k=L)
//   BM_Planner/<policy>/layers:<L>         the planner alone (schedule + plan) on a homogeneous chain of L blocks
//                                          of the mlp-deep case's first block, L = 10 .. 10^5
//   BM_Frontier/<case>/budget:<bytes>      the optimal policy's plan at a budget: geometric budgets from the
//                                          smallest feasible to store-all's peak, plus every BM_Step policy's peak
// bench/README.md lists the counters; reports/make_report.py reads them.
//
// Time overhead. One iteration of BM_Step is one pair of bench/side_by_side.h: one reference step and one policy
// step back to back, in alternating order, each from the same starting weights (both chains are put back before every
// step, outside the timed region, so every step does the same work); its manual time is the policy step's. A
// repetition's time_overhead is its policy time over its reference time, and the benchmark runs Mode::repetitions
// repetitions, so Google Benchmark's own statistics over them (median, mean, stddev, cv, and the q1/q3 added
// here) are the spread of that ratio. Drift (frequency, other load) moves both halves of an iteration alike and
// cancels in the ratio; the median drops repetitions a burst of other work hit. Steps are timed in CPU time of
// the benchmarking thread (wall time too, as *_wall counters): on a machine shared with other work a step's
// wall time counts whatever the scheduler ran meanwhile, which swamps a 3% effect. The baseline is the reference
// trainer (reference/trainer.h), the plain store-everything step a user compares against, so the store-all row's
// engine tax is the executor's own fixed cost. The counters are the measured step's (the executor's meter);
// planned_equals_measured says they equal the planner's, bitwise_equal that the step's loss, gradients and state
// equal the reference's bit for bit (`ckptcheck verify` checks every step and property). A benchmark that cannot
// run (a schedule refused, a case that does not build) is skipped with its error; the others still run.
//
// Flags (before Google Benchmark's own):
//   --ckpt_mode=short|full   short: the main job's run (BM_Step on catalogue and bench-large in about 5 minutes);
//                            full: careful runs
//   --ckpt_catalog=DIR       the catalogue (default $CKPT_SOURCE_DIR/cases/catalog, else this source tree's)
//   --ckpt_large=DIR|none    bench-large cases (default cases/bench-large next to the catalogue): wide steps of a
//                            tenth to a quarter of a second, never verified (verify and the tests do not read
//                            them); BM_Step only, under store-all and full recomputation, with fewer repetitions
//                            (Mode::largeRepetitions)
#include <benchmark/benchmark.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <memory>
#include <set>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "bench/recompute_profile.h"
#include "bench/side_by_side.h"
#include "bench/time_model.h"
#include "bench/time_model_fit.h"
#include "cases/case_json.h"
#include "common/quantile.h"
#include "harness/build_info.h"
#include "harness/compare.h"
#include "harness/dtype_dispatch.h"
#include "harness/heap_reuse.h"
#include "harness/engine/executor.h"
#include "harness/engine/plan.h"
#include "harness/engine/policy.h"
#include "harness/engine/policy_rule.h"
#include "reference/trainer.h"

namespace ckpt::bench {
namespace {

struct Mode {
  std::string name;
  int repetitions;           // BM_Step: repetitions per case x policy (Google Benchmark's statistics run over them)
  double stepMinTime;        // BM_Step: policy-step seconds per repetition (manual time)
  double plannerMinTime;     // per BM_Planner benchmark
  int64_t optimalMaxLayers;  // the optimal DP is O(L^2 J) on a homogeneous chain: planned up to this L
  int frontierPoints;        // geometric budgets per case (plus every policy's own peak)
  int largeRepetitions;      // BM_Step on bench-large cases
};

const Mode kShort{"short", 7, 0.1, 0.02, 1000, 24, 3};
const Mode kFull{"full", 21, 0.3, 0.2, 3000, 60, 7};

// Untimed steps before the timed ones: warm-ups of both chains, and instrumented steps of the recompute profile
// and the time model. A bench-large step takes a tenth to a quarter of a second, so it gets fewer.
struct Warmup {
  int steps;
  int profileSteps;
  double calibrationSeconds;  // CPU seconds of each of the time model's calibration schedules (time_model_fit.h)
};
// A calibration schedule's 1.5 s: a case's weights are fitted on up to five of them, and at 0.5 s transformer's
// a_tape ranged 0.61-0.79 over four runs, at 1.5 s 0.69-0.83 over six (2026-12-07). It costs the short run about 1.5
// minutes, and the fifth schedule about one more.
const Warmup kCatalogWarmup{3, 5, 1.5};
const Warmup kLargeWarmup{1, 2, 1.0};

// The time model of a case (bench/time_model.h): the per-op shares of its store-all step and the weights fitted
// on its calibration schedules (bench/time_model_fit.h), measured once per case and shared by its policies.
struct CaseTimeModel {
  ForwardShares shares;
  TimeModelFit fit;
  Schedule fullRecompute;  // the calibration schedule that is also a catalogue policy
};

// The case's time model, measured when no fixture's chains are alive: its calibration schedules are then timed
// as BM_Step times its policies, one pair of chains alive at a time (bench/side_by_side.h says what timing them
// otherwise did).
template <class T>
std::shared_ptr<CaseTimeModel> caseTimeModel(const CaseSpec& spec, const Warmup& warmup,
                                             const std::vector<std::string>& evaluatedPolicies) {
  const ChainCost cost = caseChainCost(spec);
  auto model = std::make_shared<CaseTimeModel>();
  model->shares = storeAllForwardShares<T>(spec, warmup.profileSteps);
  std::vector<Schedule> evaluated;
  for (const std::string& p : evaluatedPolicies) evaluated.push_back(makeSchedule(parsePolicy(p), cost));
  model->fit = fitTimeModel<T>(spec, model->shares, evaluated, warmup.calibrationSeconds, warmup.steps);
  model->fullRecompute = fullRecomputeSchedule(cost);
  return model;
}

// The quartiles are added to Google Benchmark's statistics.
double firstQuartile(const std::vector<double>& v) { return quantile(v, 0.25); }
double thirdQuartile(const std::vector<double>& v) { return quantile(v, 0.75); }

// One case x policy: schedule, plan, recompute profile and chains, built on the first call and kept for every
// repetition (Google Benchmark calls the function once per repetition, and more while sizing the first).
// The instrumented passes (the recompute profile, the forward counts) run before the timed chains are built, as the
// calibration schedules are timed with nothing run in between: run after the warm-up, their chains' allocations and
// frees moved the timed steps' own. Timed that way, albert-frozen-stem recursive measured +0.40-0.42, and +0.42-0.46
// with them first; its full recomputation +0.27-0.29 against +0.30-0.32 (2026-12-07). Over seven short runs the
// measured minus predicted overhead of albert-frozen-stem's recursive and revolve rows averaged -0.026, and of its
// full-recomputation row, timed as its own calibration schedule, -0.024; in four runs with them first, -0.003 and
// -0.007.
template <class T>
struct StepFixture {
  StepFixture(const CaseSpec& s, const std::string& policyText, const Warmup& warmup, const CaseTimeModel& model)
      : spec(s),
        cost(caseChainCost(s)),
        schedule(makeSchedule(parsePolicy(policyText), cost)),
        plan(planSchedule(schedule, cost)),  // validates the schedule
        profile(profileRecompute<T>(spec, schedule, warmup.profileSteps)),
        fit(model.fit),
        recomputes(recomputeShares(model.shares, policyForwardCounts<T>(spec, schedule), schedule)),
        predictedTimeOverhead(predictTimeOverhead(fit, recomputes)),
        calibrationRow(fit.fitted && schedule.instrs == model.fullRecompute.instrs),
        steps(s, schedule) {
    for (int i = 0; i < warmup.steps; ++i) steps.pair();  // warm up: first-touch allocations, caches
  }

  CaseSpec spec;
  ChainCost cost;
  Schedule schedule;
  Plan plan;
  RecomputeProfile profile;
  TimeModelFit fit;
  RecomputeShares recomputes;        // what the policy recomputes, weighed by the per-op times (the model's terms)
  double predictedTimeOverhead = 0;  // the time model (bench/time_model.h)
  bool calibrationRow = false;       // the policy is one of the calibration schedules (full recomputation)
  SideBySide<T> steps;               // the timed pairs (bench/side_by_side.h); the last results are the counters'
};

// What one repetition measured: sums over its iterations.
struct StepTimes {
  Elapsed ref, eng;
  int64_t steps = 0;
};

template <class T>
void stepCounters(benchmark::State& state, const StepFixture<T>& fx, const StepTimes& t) {
  const FlopCounts& f = fx.steps.engResult().flops;
  const bool bitwise =
      compareSteps(std::vector<StepResult<T>>{fx.steps.refResult()}, std::vector<StepResult<T>>{fx.steps.engResult()})
          .bitwiseEqual;
  const bool planned = fx.steps.engResult().peakActivationBytes == fx.plan.peakActivationBytes &&
                       fx.steps.engResult().forwardEvals == fx.plan.stepForwardEvals() && f == fx.plan.stepFlops();
  const double base = static_cast<double>(f.forward + f.backward);
  const double n = static_cast<double>(std::max<int64_t>(1, t.steps));
  auto& c = state.counters;
  c["layers"] = fx.cost.layers();
  c["peak_activation_bytes"] = static_cast<double>(fx.steps.engResult().peakActivationBytes);
  c["store_all_peak_activation_bytes"] = static_cast<double>(fx.steps.refResult().peakActivationBytes);
  c["forward_evals"] = static_cast<double>(fx.steps.engResult().forwardEvals);  // every micro-batch's
  c["micro_batches"] = static_cast<double>(fx.cost.microBatches);
  c["flops_forward"] = static_cast<double>(f.forward);
  c["flops_recompute"] = static_cast<double>(f.recompute);
  c["flops_backward"] = static_cast<double>(f.backward);
  // Rates: FLOPs of one policy step, per second of the policy step (the manual time).
  c["flops_per_second"] = benchmark::Counter(static_cast<double>(f.forward + f.recompute + f.backward),
                                             benchmark::Counter::kIsIterationInvariantRate);
  c["recompute_flops_per_second"] =
      benchmark::Counter(static_cast<double>(f.recompute), benchmark::Counter::kIsIterationInvariantRate);
  c["flop_overhead"] = base > 0 ? static_cast<double>(f.recompute) / base : 0.0;
  c["planned_equals_measured"] = planned ? 1 : 0;
  c["bitwise_equal"] = bitwise ? 1 : 0;
  c["time_overhead"] = t.ref.cpu > 0 ? t.eng.cpu / t.ref.cpu : 0.0;
  c["time_overhead_wall"] = t.ref.wall > 0 ? t.eng.wall / t.ref.wall : 0.0;
  // The time model (bench/time_model.h): the predicted time overhead, its inputs, and what the measured
  // overhead (time_overhead - 1) adds to it.
  c["predicted_time_overhead"] = fx.predictedTimeOverhead;
  c["time_model_recompute_share"] = fx.recomputes.taped + fx.recomputes.advancing + fx.recomputes.rebuilt;  // weights 1
  c["time_model_rebuild_share"] = fx.recomputes.rebuilt;
  c["time_model_tape_weight"] = fx.fit.tape;
  c["time_model_advance_weight"] = fx.fit.advance;
  c["time_model_rebuild_weight"] = fx.fit.rebuild;
  c["time_model_calibration_residual"] = fx.fit.residual;
  c["time_model_calibration_passes"] = fx.fit.passes;
  c["time_model_calibration_row"] = fx.calibrationRow ? 1 : 0;
  c["time_model_tax"] = t.ref.cpu > 0 ? t.eng.cpu / t.ref.cpu - 1.0 - fx.predictedTimeOverhead : 0.0;
  c["step_seconds"] = t.eng.cpu / n;
  c["store_all_step_seconds"] = t.ref.cpu / n;
  c["step_wall_seconds"] = t.eng.wall / n;
  c["store_all_step_wall_seconds"] = t.ref.wall / n;
  c["steps"] = static_cast<double>(t.steps);
  // Where the recompute time goes (see RecomputeClock): per op kind its recompute time as a share of the
  // policy's step, and its recompute FLOPs as a share of the store-all step's forward + backward FLOPs (these
  // sum to flop_overhead).
  c["recompute_time_share"] = fx.profile.share;
  for (const auto& [kind, share] : fx.profile.kindShare) {
    c["recompute_time_share." + kind] = share;
    c["recompute_flop_share." + kind] = base > 0 ? static_cast<double>(fx.profile.kindFlops.at(kind)) / base : 0.0;
  }
  state.SetLabel(fx.spec.name + " " + fx.steps.schedule().policy);
}

// `slot` holds the case x policy's StepFixture<T> once built (shared by the benchmark's calls), `model` the
// case's time model (shared by its policies, `policies`). Only one fixture is alive at a time: Google Benchmark
// runs a benchmark's repetitions one after another, and every earlier fixture's chains kept alive moved
// resnet-bn's store-all step from 1.69 ms to 2.13 ms and its uniform:k=24 overhead from +0.14 to +0.04.
std::shared_ptr<void>* liveFixture = nullptr;

template <class T>
void stepBenchmark(benchmark::State& state, const CaseSpec& spec, const std::string& policyText, const Warmup& warmup,
                   const std::vector<std::string>& policies, std::shared_ptr<void>& slot,
                   std::shared_ptr<CaseTimeModel>& model) {
  if (!slot) {
    if (liveFixture) liveFixture->reset();
    if (!model) model = caseTimeModel<T>(spec, warmup, policies);
    slot = std::make_shared<StepFixture<T>>(spec, policyText, warmup, *model);
    liveFixture = &slot;
  }
  auto& fx = *static_cast<StepFixture<T>*>(slot.get());
  StepTimes t;
  for (auto _ : state) {
    const auto [r, e] = fx.steps.pair();
    state.SetIterationTime(e.cpu);
    t.ref += r;
    t.eng += e;
    ++t.steps;
  }
  stepCounters(state, fx, t);
}

// Runs a benchmark body; an exception skips this benchmark with its message instead of ending the whole run.
template <class F>
void orSkip(benchmark::State& state, F body) {
  try {
    body();
  } catch (const std::exception& e) {
    state.SkipWithError(e.what());
  }
}

std::string family(const std::string& policy) { return policyFamily(parsePolicy(policy)); }

void planCounters(benchmark::State& state, const ChainCost& cost, const Plan& plan) {
  auto& c = state.counters;
  c["layers"] = cost.layers();
  c["peak_activation_bytes"] = static_cast<double>(plan.peakActivationBytes);
  c["forward_evals"] = static_cast<double>(plan.forwardEvals);
  c["flops_forward"] = static_cast<double>(plan.flops.forward);
  c["flops_recompute"] = static_cast<double>(plan.flops.recompute);
  c["flops_backward"] = static_cast<double>(plan.flops.backward);
  c["flop_overhead"] = plan.flopOverhead();
}

// Schedules and plans `policyText` on `cost` once per iteration; returns the last plan and sets the label.
Plan timePlanning(benchmark::State& state, const ChainCost& cost, const std::string& policyText,
                  const std::string& labelPrefix) {
  const PolicySpec policy = parsePolicy(policyText);
  Plan plan;
  std::string text;
  for (auto _ : state) {
    const Schedule s = makeSchedule(policy, cost);
    plan = planSchedule(s, cost);
    benchmark::DoNotOptimize(plan.peakActivationBytes);
    text = s.policy;
  }
  state.SetLabel(labelPrefix + text);
  return plan;
}

// The homogeneous chains of BM_Planner, one per length L, and the policy strings planned on each.
struct PlannerChain {
  std::shared_ptr<ChainCost> cost;
  std::vector<std::string> policies;
};
using PlannerChains = std::map<int64_t, PlannerChain>;

void plannerBenchmark(benchmark::State& state, const PlannerChains& chains, const std::string& fam) {
  const PlannerChain& chain = chains.at(state.range(0));
  const auto p = std::find_if(chain.policies.begin(), chain.policies.end(),
                              [&](const std::string& s) { return family(s) == fam; });
  if (p == chain.policies.end())
    throw std::logic_error("no " + fam + " policy planned at L = " + std::to_string(state.range(0)));
  const Plan plan = timePlanning(state, *chain.cost, *p, "");
  planCounters(state, *chain.cost, plan);
  state.counters["largest_block_bytes"] = static_cast<double>(chain.cost->block(0).inBytes);
}

void frontierBenchmark(benchmark::State& state, const CaseSpec& spec, const ChainCost& cost, int64_t least,
                       int64_t full) {
  const int64_t budget = state.range(0);
  const Plan plan = timePlanning(state, cost, "optimal:budget=" + std::to_string(budget), spec.name + " ");
  planCounters(state, cost, plan);
  auto& c = state.counters;
  c["budget_bytes"] = static_cast<double>(budget);
  c["least_budget_bytes"] = static_cast<double>(least);
  c["store_all_peak_activation_bytes"] = static_cast<double>(full);
}

// Budgets from the smallest feasible to store-all's peak, geometrically spaced (the frontier bends most near
// the smallest budgets), both ends included, no repeats.
std::vector<int64_t> frontierBudgets(int64_t least, int64_t full, int points) {
  std::vector<int64_t> b;
  if (full <= least || points < 2) return {std::max(least, full)};
  const double ratio = static_cast<double>(full) / static_cast<double>(least);
  for (int i = 0; i < points; ++i) {
    const double f = static_cast<double>(i) / (points - 1);
    const int64_t v =
        i == points - 1 ? full : static_cast<int64_t>(std::llround(static_cast<double>(least) * std::pow(ratio, f)));
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
  if (const char* root = std::getenv("CKPT_SOURCE_DIR"); root && *root)
    return std::filesystem::path(root) / "cases" / "catalog";
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

// The report groups BM_Step rows into families by this context entry, "policy_family:<policy>", so it never reads
// a policy string itself. Once per policy (Google Benchmark refuses a key twice).
void addPolicyFamily(const std::string& policy) {
  static std::set<std::string> added;
  if (added.insert(policy).second) benchmark::AddCustomContext("policy_family:" + policy, family(policy));
}

// Catalogue cases under stepPolicies(); bench-large cases (large = true) under store-all and full recomputation.
void registerSteps(const Mode& mode, const std::vector<CaseSpec>& cases, bool large) {
  const Warmup warmup = large ? kLargeWarmup : kCatalogWarmup;
  for (const CaseSpec& spec : cases) {
    const ChainCost cost = caseChainCost(spec);
    auto model = std::make_shared<std::shared_ptr<CaseTimeModel>>();
    const std::vector<std::string> policies =
        large ? std::vector<std::string>{"store-all", "uniform:k=" + std::to_string(cost.layers())}
              : stepPolicies(cost);
    for (const std::string& policy : policies) {
      addPolicyFamily(policy);
      auto slot = std::make_shared<std::shared_ptr<void>>();
      benchmark::RegisterBenchmark(("BM_Step/" + spec.name + "/" + policy).c_str(),
                                   [spec, policy, policies, warmup, slot, model](benchmark::State& st) {
                                     orSkip(st, [&] {
                                       withScalar(spec.dtype, [&](auto t) {
                                         stepBenchmark<decltype(t)>(st, spec, policy, warmup, policies, *slot, *model);
                                       });
                                     });
                                   })
          ->UseManualTime()
          ->MinTime(mode.stepMinTime)
          ->Repetitions(large ? mode.largeRepetitions : mode.repetitions)
          ->ComputeStatistics("q1", firstQuartile)
          ->ComputeStatistics("q3", thirdQuartile)
          ->DisplayAggregatesOnly()  // the console shows the statistics; the JSON keeps every repetition
          ->Unit(benchmark::kMicrosecond);
    }
  }
}

void registerPlanner(const Mode& mode, const std::vector<CaseSpec>& cases) {
  const CaseSpec base = scalingSpec(cases);
  auto chains = std::make_shared<PlannerChains>();
  std::vector<std::string> families;  // in first-planned order
  for (int64_t layers : {10, 30, 100, 300, 1000, 3000, 10000, 30000, 100000}) {
    PlannerChain& chain = (*chains)[layers];
    chain.cost = std::make_shared<ChainCost>(homogeneousChainCost(base, layers));
    // Every policy's default; those that need quadratic planning (optimal's least-peak DP) only up to the mode's
    // limit, out of reach at 10^5 blocks.
    chain.policies = defaultPolicies(*chain.cost, layers <= mode.optimalMaxLayers);
    for (const auto& p : chain.policies)
      if (std::find(families.begin(), families.end(), family(p)) == families.end()) families.push_back(family(p));
  }
  for (const std::string& fam : families) {
    auto* b = benchmark::RegisterBenchmark(("BM_Planner/" + fam).c_str(), [chains, fam](benchmark::State& st) {
      orSkip(st, [&] { plannerBenchmark(st, *chains, fam); });
    });
    b->ArgNames({"layers"})->MinTime(mode.plannerMinTime)->Unit(benchmark::kMillisecond);
    for (const auto& [layers, chain] : *chains)
      for (const auto& p : chain.policies)
        if (family(p) == fam) b->Arg(layers);
  }
}

void registerFrontiers(const Mode& mode, const std::vector<CaseSpec>& cases) {
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
    auto* b = benchmark::RegisterBenchmark(("BM_Frontier/" + spec.name).c_str(),
                                           [cost, spec, least, full](benchmark::State& st) {
                                             orSkip(st, [&] { frontierBenchmark(st, spec, *cost, least, full); });
                                           });
    b->ArgNames({"budget"})->Iterations(1)->Unit(benchmark::kMillisecond);
    for (const int64_t budget : budgets) b->Arg(budget);
  }
}

void registerAll(const Mode& mode, const std::vector<CaseSpec>& cases, const std::vector<CaseSpec>& large) {
  registerSteps(mode, cases, false);
  registerSteps(mode, large, true);
  registerPlanner(mode, cases);
  registerFrontiers(mode, cases);
}

}  // namespace
}  // namespace ckpt::bench

int main(int argc, char** argv) {
  ckpt::keepFreedMemoryForReuse();
  using namespace ckpt::bench;
  const Mode* mode = &kShort;
  std::filesystem::path catalog = defaultCatalog();
  std::string largeDir;  // empty: bench-large next to the catalogue
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
    else if (a.rfind("--ckpt_large=", 0) == 0) largeDir = a.substr(13);
    else argv[kept++] = argv[i];
  }
  argc = kept;
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 2;
  try {
    const auto cases = loadCatalog(catalog);
    std::vector<ckpt::CaseSpec> large;
    if (largeDir != "none") {
      const std::filesystem::path dir =
          largeDir.empty() ? (catalog / "..").lexically_normal() / "bench-large" : std::filesystem::path(largeDir);
      if (!largeDir.empty() && !std::filesystem::is_directory(dir)) {
        std::cerr << "bench_engine: --ckpt_large=" << largeDir << ": not a directory\n";
        return 2;
      }
      if (std::filesystem::is_directory(dir)) large = loadCatalog(dir);
    }
    if (cases.empty()) {
      std::cerr << "bench_engine: no cases in " << catalog << "\n";
      return 2;
    }
    benchmark::AddCustomContext("ckpt_mode", mode->name);
    benchmark::AddCustomContext("git_commit", ckpt::kGitCommit);
    benchmark::AddCustomContext("compiler", ckpt::kCompiler);
    benchmark::AddCustomContext("build_type", ckpt::kBuildType);
    benchmark::AddCustomContext("cpu_arch", std::string(ckpt::kCpuArch) + " (" + ckpt::kCpuArchFlags + ")");
    benchmark::AddCustomContext("eigen_simd", Eigen::SimdInstructionSetsInUse());
    benchmark::AddCustomContext("cpu", cpuModel());
    benchmark::AddCustomContext("ckptcheck_version", ckpt::kVersion);
    registerAll(*mode, cases, large);
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
