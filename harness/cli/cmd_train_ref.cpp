// ckptcheck train-ref: the reference trainer on one case — loss, gradient norms, peak bytes, FLOPs per phase.
#include <chrono>
#include <cmath>
#include <iomanip>
#include <iostream>
#include <nlohmann/json.hpp>

#include "cases/case_json.h"
#include "harness/cli/commands.h"
#include "harness/dtype_dispatch.h"
#include "harness/engine/resource_guard.h"
#include "reference/trainer.h"

namespace ckpt::cli {
namespace {

struct Options {
  std::string casePath;
  int steps = 0;
  bool json = false;
  std::string maxActivationBytes;
};

template <class T>
nlohmann::json trainRefJson(const CaseSpec& spec, int steps) {
  Chain<T> chain = buildChain<T>(spec);
  nlohmann::json out;
  out["case"] = spec.name;
  out["dtype"] = dtypeName(spec.dtype);
  out["layers"] = chain.size();
  out["steps"] = nlohmann::json::array();
  for (int s = 0; s < steps; ++s) {
    const auto t0 = std::chrono::steady_clock::now();
    StepResult<T> r = referenceStep(chain, s);
    const double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
    nlohmann::json js;
    js["step"] = s;
    js["loss"] = static_cast<double>(r.loss);
    js["finite"] = std::isfinite(static_cast<double>(r.loss));
    nlohmann::json norms = nlohmann::json::object();
    for (const auto& g : r.grads) norms[g.name] = static_cast<double>(g.value.norm());
    norms["input"] = static_cast<double>(r.inputGrad.norm());
    js["grad_norms"] = norms;
    js["peak_activation_bytes"] = r.peakActivationBytes;
    js["forward_evals"] = r.forwardEvals;
    js["flops"] = {{"forward", r.flops.forward}, {"recompute", r.flops.recompute}, {"backward", r.flops.backward}};
    js["rng_offset"] = r.rng.offset;
    js["time_ms"] = ms;
    out["steps"].push_back(js);
  }
  return out;
}

void printText(const nlohmann::json& j) {
  std::cout << "case " << j["case"].get<std::string>() << " (" << j["dtype"].get<std::string>() << ", " << j["layers"]
            << " blocks)\n";
  for (const auto& s : j["steps"]) {
    std::cout << "step " << s["step"] << ": loss " << std::setprecision(9) << s["loss"].get<double>()
              << ", peak activation bytes " << s["peak_activation_bytes"] << ", FLOPs forward " << s["flops"]["forward"]
              << " backward " << s["flops"]["backward"] << ", " << std::setprecision(3) << s["time_ms"].get<double>()
              << " ms\n";
  }
  const auto& last = j["steps"].back();
  std::cout << "gradient norms after step " << last["step"] << ":\n";
  for (auto it = last["grad_norms"].begin(); it != last["grad_norms"].end(); ++it)
    std::cout << "  " << std::left << std::setw(24) << it.key() << std::setprecision(6) << it.value().get<double>()
              << "\n";
}

}  // namespace

void addTrainRef(CLI::App& app, int& exitCode) {
  auto opt = std::make_shared<Options>();
  auto* cmd = app.add_subcommand("train-ref", "Run the exact store-everything reference trainer on a case");
  cmd->add_option("--case", opt->casePath, "Case JSON file (cases/SCHEMA.md)")->required();
  cmd->add_option("--steps", opt->steps, "Training steps (default: the case's)")->check(CLI::Range(1, 10000));
  cmd->add_flag("--json", opt->json, "Machine-readable output");
  cmd->add_option("--max-activation-bytes", opt->maxActivationBytes, kMaxActivationBytesHelp);
  cmd->callback([opt, &exitCode] {
    const CaseSpec spec = loadCase(opt->casePath);
    guardCase(spec, {}, memoryLimit(opt->maxActivationBytes));
    const int steps = opt->steps > 0 ? opt->steps : spec.steps;
    const nlohmann::json j = withScalar(spec.dtype, [&](auto t) { return trainRefJson<decltype(t)>(spec, steps); });
    if (opt->json) std::cout << j.dump(2) << "\n";
    else printText(j);
    bool finite = true;
    for (const auto& s : j["steps"]) finite = finite && s["finite"].get<bool>();
    exitCode = finite ? 0 : 1;
  });
}

}  // namespace ckpt::cli
