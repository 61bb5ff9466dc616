// GPU benchmarks (Google Benchmark; GPU time from CUDA events, reported with UseManualTime):
//  BM_GpuStep/<case>/<policy>   one training step per iteration on the GPU under each default policy, for the
//                               transformer catalogue case and a GPU-sized variant of it. Counters: FLOP/s of
//                               the step (forward + recompute + backward), measured and planned activation peak,
//                               the pool's peak reserved device bytes, the planned FLOP overhead and the
//                               measured time overhead over store-all (overhead vs theory).
//  BM_DropoutKernel/<n>, BM_DeviceCopy/<n>   bytes/s of the dropout forward kernel (12 B an element) and of
//                               cudaMemcpy device-to-device (8 B an element): the kernel against the copy roof.
// Without a CUDA device every benchmark reports SkipWithError("no CUDA device"), never a number.
#include <benchmark/benchmark.h>

#include <cstdlib>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "cases/case_json.h"
#include "device/gpu.h"
#include "harness/engine/device_steps.h"
#include "harness/engine/plan.h"
#include "harness/engine/policy.h"

namespace ckpt::gpu {
namespace {

std::string sourceDir() {
  const char* d = std::getenv("CKPT_SOURCE_DIR");
  return d ? d : CKPT_SOURCE_DIR_DEFAULT;
}

// The catalogue transformer case, and a GPU-sized variant: GPT-2-small-like blocks (width 768, 12 heads) on
// 8 sequences of 256 tokens, 12 blocks.
CaseSpec benchCase(const std::string& name) {
  CaseSpec c = loadCase(sourceDir() + "/cases/catalog/transformer.json");
  if (name == "transformer-gpu") {
    c.name = name;
    c.batch = 8;
    c.seq = 256;
    c.width = 768;
    const BlockSpec b = c.blocks.front();
    c.blocks.assign(12, b);
    for (auto& bs : c.blocks) bs.heads = 12;
  }
  return c;
}

constexpr int kWarmupSteps = 2;

// One trainer per case, shared by its policies (a step leaves the model updated, which does not change what a
// step costs), plus the case's store-all step time for the overhead counter.
struct CaseState {
  CaseSpec spec;
  ChainCost cost;
  std::unique_ptr<DeviceRunner<float>> trainer;
  double storeAllMs = 0;
  int step = 0;
};

// Emptied at the end of main, while the CUDA runtime is still up (not by static destruction).
std::map<std::string, std::unique_ptr<CaseState>>& caseStates() {
  static std::map<std::string, std::unique_ptr<CaseState>> cases;
  return cases;
}

CaseState& caseState(const std::string& name) {
  auto& s = caseStates()[name];
  if (!s) {
    s = std::make_unique<CaseState>();
    s->spec = benchCase(name);
    s->cost = homogeneousChainCost(s->spec, static_cast<int64_t>(s->spec.blocks.size()));
  }
  return *s;
}

double meanStepMs(CaseState& c, const Schedule& s, int steps) {
  double total = 0;
  for (int k = 0; k < steps; ++k) total += c.trainer->timedStep(s, c.step++);
  return total / steps;
}

void BM_GpuStep(benchmark::State& state, const std::string& caseName, const std::string& policy) {
  if (cudaDeviceCount() == 0) {
    state.SkipWithError("no CUDA device");
    return;
  }
  CaseState& c = caseState(caseName);
  if (!c.trainer) {
    c.trainer = std::make_unique<DeviceRunner<float>>(Device::kCuda, c.spec);
    const Schedule storeAll = storeAllSchedule(c.cost);
    meanStepMs(c, storeAll, kWarmupSteps);
    c.storeAllMs = meanStepMs(c, storeAll, 5);
  }
  const Schedule schedule = makeSchedule(parsePolicy(policy), c.cost);
  const Plan plan = planSchedule(schedule, c.cost);
  meanStepMs(c, schedule, kWarmupSteps);
  c.trainer->resetPeakMemory();
  StepResult<float> measured;
  double totalMs = 0;
  int64_t iters = 0;
  for (auto _ : state) {
    const double ms = c.trainer->timedStep(schedule, c.step++, &measured);
    state.SetIterationTime(ms / 1e3);
    totalMs += ms;
    ++iters;
  }
  using benchmark::Counter;
  state.SetLabel(policy);
  state.counters["flops"] = Counter(static_cast<double>(measured.flops.total()), Counter::kIsIterationInvariantRate);
  state.counters["recompute_flops"] = static_cast<double>(measured.flops.recompute);
  state.counters["peak_activation_bytes"] = static_cast<double>(measured.peakActivationBytes);
  state.counters["planned_peak_activation_bytes"] = static_cast<double>(plan.peakActivationBytes);
  state.counters["pool_peak_reserved_bytes"] = static_cast<double>(c.trainer->memory().peakReservedBytes);
  state.counters["forward_evals"] = static_cast<double>(measured.forwardEvals);
  state.counters["flop_overhead_planned"] = plan.flopOverhead();
  state.counters["time_overhead_measured"] = iters > 0 && c.storeAllMs > 0 ? totalMs / iters / c.storeAllMs - 1 : 0;
  state.counters["store_all_ms"] = c.storeAllMs;
}

void BM_DropoutKernel(benchmark::State& state) {
  if (cudaDeviceCount() == 0) {
    state.SkipWithError("no CUDA device");
    return;
  }
  const int64_t n = state.range(0);
  GpuBandwidthProbe probe(n);
  for (auto _ : state) state.SetIterationTime(probe.dropoutMs(0.1, 20) / 1e3);
  state.SetBytesProcessed(state.iterations() * n * 12);
  state.counters["elements"] = static_cast<double>(n);
}

void BM_DeviceCopy(benchmark::State& state) {
  if (cudaDeviceCount() == 0) {
    state.SkipWithError("no CUDA device");
    return;
  }
  const int64_t n = state.range(0);
  GpuBandwidthProbe probe(n);
  for (auto _ : state) state.SetIterationTime(probe.copyMs(20) / 1e3);
  state.SetBytesProcessed(state.iterations() * n * 8);
  state.counters["elements"] = static_cast<double>(n);
}

BENCHMARK(BM_DropoutKernel)->ArgNames({"elements"})->RangeMultiplier(16)->Range(1 << 16, 1 << 28)->UseManualTime();
BENCHMARK(BM_DeviceCopy)->ArgNames({"elements"})->RangeMultiplier(16)->Range(1 << 16, 1 << 28)->UseManualTime();

void registerStepBenchmarks() {
  for (const std::string name : {"transformer", "transformer-gpu"}) {
    CaseState& c = caseState(name);
    for (const std::string& policy : defaultPolicies(c.cost)) {
      benchmark::RegisterBenchmark(("BM_GpuStep/" + name + "/" + policy).c_str(),
                                   [name, policy](benchmark::State& st) { BM_GpuStep(st, name, policy); })
          ->UseManualTime()
          ->Unit(benchmark::kMillisecond);
    }
  }
}

}  // namespace
}  // namespace ckpt::gpu

int main(int argc, char** argv) {
  ckpt::gpu::registerStepBenchmarks();
  // The GPU, driver and library versions go into the JSON output's context.
  benchmark::AddCustomContext("cuda", ckpt::gpu::cudaDeviceInfo().dump());
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  ckpt::gpu::caseStates().clear();
  return 0;
}
