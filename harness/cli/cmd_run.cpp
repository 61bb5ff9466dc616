// ckptcheck run: one policy against the reference on a case. Both train fresh chains built from the same case
// for N steps; the results must be bitwise equal, and every step's measured peak activation bytes, forward
// evaluations and FLOPs per phase must equal the planner's prediction. "measured" reports step 0 (the plan is
// the same for every step; any step that differs is listed in plan_mismatches).
#include <algorithm>
#include <chrono>
#include <iostream>
#include <memory>
#include <nlohmann/json.hpp>

#include "cases/case_json.h"
#include "common/input_error.h"
#include "harness/cli/commands.h"
#include "harness/compare.h"
#include "harness/diagnose_steps.h"
#include "harness/dtype_dispatch.h"
#include "harness/engine/device_steps.h"
#include "harness/engine/executor.h"
#include "harness/engine/policy.h"
#include "harness/engine/resource_guard.h"
#include "harness/exit_codes.h"
#include "harness/mutants/catalog.h"
#include "harness/text_format.h"
#include "reference/trainer.h"

namespace ckpt::cli {
namespace {

struct Options {
  std::string casePath;
  std::string mutant;  // a broken engine from harness/mutants/ (replays a `verify --mutant` finding)
  std::string policy;
  std::string rng;
  int steps = 0;
  int repeat = 1;
  bool json = false;
  std::string maxActivationBytes;
  std::string device = "cpu";
};

nlohmann::json costJson(int64_t peak, int64_t forwardEvals, const FlopCounts& f) {
  return {{"peak_activation_bytes", peak},
          {"forward_evals", forwardEvals},
          {"flops", {{"forward", f.forward}, {"recompute", f.recompute}, {"backward", f.backward}}}};
}

template <class T>
nlohmann::json planMismatches(const Plan& plan, const std::vector<StepResult<T>>& rs) {
  nlohmann::json out = nlohmann::json::array();
  auto check = [&](int step, const char* field, int64_t planned, int64_t measured) {
    if (planned != measured)
      out.push_back({{"step", step}, {"field", field}, {"planned", planned}, {"measured", measured}});
  };
  for (size_t s = 0; s < rs.size(); ++s) {
    const int step = static_cast<int>(s);
    check(step, "peak_activation_bytes", plan.peakActivationBytes, rs[s].peakActivationBytes);
    // A step runs the schedule once per micro-batch: compare with the plan's step totals.
    check(step, "forward_evals", plan.stepForwardEvals(), rs[s].forwardEvals);
    check(step, "flops.forward", plan.stepFlops().forward, rs[s].flops.forward);
    check(step, "flops.recompute", plan.stepFlops().recompute, rs[s].flops.recompute);
    check(step, "flops.backward", plan.stepFlops().backward, rs[s].flops.backward);
  }
  return out;
}

// Wall and CPU milliseconds of f().
struct Millis {
  double wall = 0, cpu = 0;
};
template <class F>
Millis millis(F&& f) {
  const auto t0 = std::chrono::steady_clock::now();
  const double c0 = processCpuMs();
  f();
  return {std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count(),
          processCpuMs() - c0};
}

template <class T>
nlohmann::json runJson(const CaseSpec& spec, const PolicySpec& policy, int steps, int repeat,
                       const EngineVariant& engine, Device device) {
  const ChainCost cost = caseChainCost(spec);
  const Schedule schedule = makeSchedule(policy, cost);
  const Plan plan = planSchedule(schedule, cost);
  const Schedule storeAll = storeAllSchedule(cost);
  std::vector<StepResult<T>> ref, eng;
  Millis refTime, engTime;
  ExecutorTimes engRecompute;
  // Runs alternate on fresh chains; the fastest of each is the time reported (the least disturbed by other load).
  // On a device the reference is the device's store-all (times include building and uploading the chain).
  for (int r = 0; r < repeat; ++r) {
    Chain<T> refChain = buildChain<T>(spec);
    Chain<T> engChain = buildChain<T>(spec);
    std::vector<StepResult<T>> a, b;
    ExecutorTimes times;
    const bool cpu = device == Device::kCpu;
    const Millis ra =
        millis([&] { a = cpu ? trainReference(refChain, steps) : deviceSteps<T>(device, spec, storeAll, steps); });
    const Millis rb = millis([&] {
      b = cpu ? executeSteps(engChain, schedule, steps, engine, &times)
              : deviceSteps<T>(device, spec, schedule, steps, engine);
    });
    if (r == 0 || ra.wall < refTime.wall) refTime.wall = ra.wall;
    if (r == 0 || ra.cpu < refTime.cpu) refTime.cpu = ra.cpu;
    if (r == 0 || rb.wall < engTime.wall) {
      engTime.wall = rb.wall;
      engRecompute.recomputeMs = times.recomputeMs;
    }
    if (r == 0 || rb.cpu < engTime.cpu) {
      engTime.cpu = rb.cpu;
      engRecompute.recomputeCpuMs = times.recomputeCpuMs;
    }
    if (r == 0) {
      ref = std::move(a);
      eng = std::move(b);
    }
  }
  const Comparison cmp = compareSteps(ref, eng);
  // A reference that diverged (a case whose lr overflows the parameters) equals any other NaN run bit for bit.
  const std::optional<std::string> notFinite = firstNonFinite(ref);
  // The class of a difference, as verify reports it for the finding this run replays (harness/diagnose.h).
  std::optional<Diagnosis> diagnosis;
  if (!cmp.bitwiseEqual) {
    Chain<T> fresh = buildChain<T>(spec);
    std::vector<NamedMat<T>> initial;
    for (auto* b : fresh.buffers()) initial.push_back({b->name, b->value});
    diagnosis = diagnoseSteps(ref, eng, initial, kRoundingLevelUlp, spec.microBatches);
  }
  const nlohmann::json mismatches = planMismatches(plan, eng);
  nlohmann::json j;
  j["case"] = spec.name;
  j["device"] = deviceName(device);
  j["dtype"] = dtypeName(spec.dtype);
  j["rng"] = rngModelName(spec.rng);
  j["policy"] = schedule.policy;
  j["layers"] = cost.layers();
  j["steps"] = steps;
  j["bitwise_equal"] = cmp.bitwiseEqual;
  j["not_finite"] = notFinite ? nlohmann::json(*notFinite) : nlohmann::json();
  j["differences"] = toJson(cmp)["differences"];
  j["diagnosis"] = diagnosis ? toJson(*diagnosis) : nlohmann::json();
  j["planned"] = costJson(plan.peakActivationBytes, plan.stepForwardEvals(), plan.stepFlops());
  j["measured"] = costJson(eng[0].peakActivationBytes, eng[0].forwardEvals, eng[0].flops);
  j["reference"] = costJson(ref[0].peakActivationBytes, ref[0].forwardEvals, ref[0].flops);
  j["planned_equals_measured"] = mismatches.empty();
  j["plan_mismatches"] = mismatches;
  j["flop_overhead"] = plan.flopOverhead();
  // policy = the reference's work + recompute + the engine's bookkeeping. engine_tax is the last relative to the
  // reference, from CPU times (wall times move with whatever else shares the cores).
  j["wall_ms"] = {
      {"reference", refTime.wall}, {"policy", engTime.wall}, {"policy_recompute", engRecompute.recomputeMs}};
  j["cpu_ms"] = {
      {"reference", refTime.cpu}, {"policy", engTime.cpu}, {"policy_recompute", engRecompute.recomputeCpuMs}};
  j["time_ratio"] = refTime.wall > 0 ? engTime.wall / refTime.wall : 0.0;
  j["cpu_ratio"] = refTime.cpu > 0 ? engTime.cpu / refTime.cpu : 0.0;
  // On a device the recompute is not timed separately (kernels run asynchronously to the host code around them,
  // so a host clock there would mislead), so the tax is not known (null).
  if (device == Device::kCpu)
    j["engine_tax"] = refTime.cpu > 0 ? (engTime.cpu - engRecompute.recomputeCpuMs - refTime.cpu) / refTime.cpu : 0.0;
  else j["engine_tax"] = nullptr;
  return j;
}

void printText(const nlohmann::json& j) {
  std::cout << "case " << j["case"].get<std::string>() << " (" << j["dtype"].get<std::string>() << ", "
            << j["rng"].get<std::string>() << " rng, " << j["layers"] << " blocks), policy "
            << j["policy"].get<std::string>() << ", " << j["steps"] << " steps"
            << (j["device"] == "cpu" ? "" : ", on " + j["device"].get<std::string>() + " against its own store-all")
            << "\n";
  if (j["not_finite"].is_string())
    std::cout << "bitwise equal to the reference: not judged, the reference is not finite ("
              << j["not_finite"].get<std::string>() << ")\n";
  else std::cout << "bitwise equal to the reference: " << (j["bitwise_equal"].get<bool>() ? "yes" : "NO") << "\n";
  int shown = 0;
  for (const auto& d : j["differences"]) {
    if (shown++ == 20) {
      std::cout << "  ... " << j["differences"].size() - 20 << " more\n";
      break;
    }
    std::cout << "  step " << d["step"] << " " << d["tensor"].get<std::string>() << ": ";
    if (d.contains("shape")) std::cout << "shapes " << d["shape"].get<std::string>() << "\n";
    else
      std::cout << d["count"] << " differ, first [" << d["first_index"] << "] " << d["expected"].get<std::string>()
                << " vs " << d["actual"].get<std::string>() << " (" << d["ulp_distance"] << " ulp)\n";
  }
  if (j["diagnosis"].is_object())
    std::cout << "  class " << j["diagnosis"]["class"].get<std::string>() << ": "
              << j["diagnosis"]["why"].get<std::string>() << "\n";
  const auto& p = j["planned"];
  const auto& m = j["measured"];
  std::cout << "planned == measured: " << (j["planned_equals_measured"].get<bool>() ? "yes" : "NO") << "\n";
  std::cout << "  peak activation bytes  planned " << p["peak_activation_bytes"] << "  measured "
            << m["peak_activation_bytes"] << "  (reference " << j["reference"]["peak_activation_bytes"] << ")\n";
  std::cout << "  forward evaluations    planned " << p["forward_evals"] << "  measured " << m["forward_evals"] << "\n";
  for (const char* phase : {"forward", "recompute", "backward"})
    std::cout << "  FLOPs " << phase << std::string(17 - std::string(phase).size(), ' ') << "planned "
              << p["flops"][phase] << "  measured " << m["flops"][phase] << "\n";
  for (const auto& mm : j["plan_mismatches"])
    std::cout << "  step " << mm["step"] << " " << mm["field"].get<std::string>() << ": planned " << mm["planned"]
              << ", measured " << mm["measured"] << "\n";
  std::cout << "FLOP overhead " << j["flop_overhead"].get<double>() << "; wall ms reference "
            << j["wall_ms"]["reference"].get<double>() << ", policy " << j["wall_ms"]["policy"].get<double>()
            << " (ratio " << j["time_ratio"].get<double>() << "); CPU ms reference "
            << j["cpu_ms"]["reference"].get<double>() << ", policy " << j["cpu_ms"]["policy"].get<double>()
            << " of which recompute " << j["cpu_ms"]["policy_recompute"].get<double>() << " (ratio "
            << j["cpu_ratio"].get<double>();
  if (j["engine_tax"].is_number()) std::cout << ", engine tax " << j["engine_tax"].get<double>();
  std::cout << ")\n";
}

}  // namespace

void addRun(CLI::App& app, int& exitCode) {
  auto o = std::make_shared<Options>();
  auto* cmd = app.add_subcommand("run", "Run a policy against the reference: bitwise equality and planned == measured");
  cmd->add_option("--case", o->casePath, "Case JSON file (cases/SCHEMA.md)")->required();
  cmd->add_option("--policy", o->policy, "Policy string, e.g. uniform:k=8, uniform+selective or schedule:FILE")
      ->required();
  cmd->add_option("--steps", o->steps, "Training steps (default: the case's)")->check(CLI::Range(1, 10000));
  cmd->add_option("--rng", o->rng, "Override the case's generator model: counter or stateful")
      ->check(CLI::IsMember({"counter", "stateful"}));
  cmd->add_option("--repeat", o->repeat, "Run both N times and report the fastest wall times (default 1)")
      ->check(CLI::Range(1, 1000));
  cmd->add_flag("--json", o->json, "Machine-readable output");
  cmd->add_option("--mutant", o->mutant, "Run a broken engine from `ckptcheck mutants` instead of the correct one");
  cmd->add_option("--max-activation-bytes", o->maxActivationBytes, kMaxActivationBytesHelp);
  cmd->add_option("--device", o->device,
                  "cpu (default: against the CPU reference trainer), cuda (the GPU backend, against GPU store-all) or "
                  "cuda-emulated (the device code on the CPU, against its own store-all)");
  cmd->callback([o, &exitCode] {
    const Device device = parseDevice(o->device);
    requireDevice(device);
    CaseSpec spec = loadCase(o->casePath);
    if (!o->rng.empty()) spec.rng = o->rng == "counter" ? RngModel::kCounter : RngModel::kStateful;
    const PolicySpec policy = parsePolicy(o->policy);
    guardCase(spec, {policy}, memoryLimit(o->maxActivationBytes));
    const int steps = o->steps > 0 ? o->steps : spec.steps;
    std::unique_ptr<EngineVariant> engine = std::make_unique<EngineVariant>();
    if (!o->mutant.empty()) {
      const Mutant* m = findMutant(o->mutant);
      if (!m) throw InputError("unknown mutant '" + o->mutant + "' (known: " + mutantNames() + ")");
      engine = m->make();
    }
    const nlohmann::json j = withScalar(
        spec.dtype, [&](auto t) { return runJson<decltype(t)>(spec, policy, steps, o->repeat, *engine, device); });
    if (o->json) std::cout << j.dump(2) << "\n";
    else printText(j);
    exitCode = j["bitwise_equal"].get<bool>() && j["planned_equals_measured"].get<bool>() ? kExitOk : kExitFinding;
    if (j["not_finite"].is_string()) {  // not judged: neither holds nor a finding
      std::cerr << "ckptcheck: "
                << escapeControl("the reference run of case '" + spec.name +
                                 "' is not finite: " + j["not_finite"].get<std::string>() + "; " + kNotJudged)
                << "\n";
      exitCode = kExitInfra;
    }
  });
}

}  // namespace ckpt::cli
