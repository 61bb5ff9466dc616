#include "harness/user_model/user_model_report.h"

#include <sys/stat.h>  // fchmod, which harness/atomic_file.h uses

#include <filesystem>
#include <sstream>

#include "harness/validate/runner.h"
#include "harness/atomic_file.h"
#include "harness/exit_codes.h"
#include "harness/text_format.h"

namespace ckpt {
namespace fs = std::filesystem;
using nlohmann::json;

namespace {

constexpr size_t kListedDifferences = 20;

const char* statusName(SeedOutcome::Status s) {
  switch (s) {
    case SeedOutcome::Status::kHolds:
      return "holds";
    case SeedOutcome::Status::kFinding:
      return "finding";
    case SeedOutcome::Status::kFault:
      return "fault";
    case SeedOutcome::Status::kBadInput:
      return "bad-input";
  }
  return "fault";
}

bool compared(const SeedOutcome& s) {
  return s.status == SeedOutcome::Status::kHolds || s.status == SeedOutcome::Status::kFinding;
}

std::string bitwiseResult(const SeedOutcome& s) {
  if (!compared(s)) return "not-run";
  if (s.checkpointRaised) return "finding";
  if (s.differences.empty()) return "holds";
  return s.roundingAccepted ? "rounding-accepted" : "finding";
}

std::string signedPct(double v) { return (v >= 0 ? "+" : "") + fixed(100.0 * v, 1) + "%"; }

json optionalNumber(const std::optional<double>& v) { return v ? json(*v) : json(nullptr); }

json planJson(const UserModelReport& r, const PlanOutcome& p) {
  json j = {{"policy", r.placement ? r.placement->policy : ""},
            {"placement", r.placement ? r.placement->path : ""},
            {"predicted_saved_bytes", p.predictedBytes},
            {"measured_saved_bytes", p.measuredBytes},
            {"predicted_time_overhead", optionalNumber(p.predictedTime)},
            {"measured_time_overhead", optionalNumber(p.measuredTime)},
            {"timed_pairs", p.timedPairs},
            {"measured_time_overhead_middle_half",
             p.measuredTimeMiddleHalf ? json::array({p.measuredTimeMiddleHalf->first, p.measuredTimeMiddleHalf->second})
                                      : json(nullptr)},
            {"predicted_peak_bytes", p.predictedPeak},
            {"measured_peak_bytes", p.measuredPeak ? json(*p.measuredPeak) : json(nullptr)},
            {"result", p.finding ? "finding" : "holds"}};
  if (p.finding) j["why"] = p.why;
  return j;
}

std::string planLine(const UserModelReport& r, const PlanOutcome& p) {
  std::string line = std::string("plan ") + (p.finding ? "FINDING" : "holds") + " (" +
                     (r.placement ? r.placement->policy : std::string("?")) + "): saved bytes predicted " +
                     std::to_string(p.predictedBytes) + ", measured " + std::to_string(p.measuredBytes) +
                     "; peak predicted " + std::to_string(p.predictedPeak) + ", measured " +
                     (p.measuredPeak ? std::to_string(*p.measuredPeak) + " (" +
                                           signedPct(static_cast<double>(*p.measuredPeak) / p.predictedPeak - 1.0) + ")"
                                     : std::string("not measured"));
  if (p.predictedTime || p.measuredTime)
    line += "; step-time overhead predicted " + (p.predictedTime ? signedPct(*p.predictedTime) : std::string("n/a")) +
            ", measured " + (p.measuredTime ? signedPct(*p.measuredTime) : std::string("n/a")) +
            (p.timedPairs > 0
                 ? " (median of " + std::to_string(p.timedPairs) + " steps side by side" +
                       (p.measuredTimeMiddleHalf ? ", middle half " + signedPct(p.measuredTimeMiddleHalf->first) +
                                                       " to " + signedPct(p.measuredTimeMiddleHalf->second)
                                                 : std::string()) +
                       ")"
                 : "");
  return line;
}

// Where an accepted tolerance comes from: the user's --ulp, or the JAX default (user_model_jax.h).
std::string ulpSource(const UserModelReport& r) {
  return r.spec.framework == "jax" && !r.options->ulpGiven
             ? "the JAX default, harness/user_model/jax/USER_MODEL.md; --ulp 0 for bitwise only"
             : "--ulp";
}

// A JAX run's compiled temp bytes (XLA's memory analysis of the step), when reported.
std::optional<int64_t> compiledTemp(const std::optional<json>& m) {
  if (!m || !m->contains("temp") || !(*m)["temp"].is_number_integer()) return std::nullopt;
  return (*m)["temp"].get<int64_t>();
}

double saving(const SeedOutcome& s) {
  return 1.0 - static_cast<double>(*s.savedCheckpoint) / static_cast<double>(*s.savedPlain);
}

std::vector<std::string> replayArgs(const UserModelReport& r, const SeedOutcome& s) {
  std::vector<std::string> a = {
      "ckptcheck", "validate", "--adapter", r.spec.label,           "--seed", std::to_string(s.seed),
      "--seeds",   "1",        "--steps",   std::to_string(s.steps)};
  if (s.batchSize > 0) {
    a.push_back("--batch-size");
    a.push_back(std::to_string(s.batchSize));
  }
  if (s.zeroBatch) a.push_back("--zero-batch");
  if (r.placement) {
    a.push_back("--plan");
    a.push_back(r.placement->path);
  }
  return a;
}

json seedJson(const UserModelReport& r, const SeedOutcome& s) {
  json j = {{"seed", s.seed},
            {"steps", s.steps},
            {"batch_size", s.batchSize},
            {"zero_batch", s.zeroBatch},
            {"status", statusName(s.status)},
            {"bitwise", bitwiseResult(s)},
            {"dir", s.dir}};
  if (!s.error.empty()) j["error"] = s.error;
  if (!s.differences.empty()) {
    j["first_difference"] = toJson(s.differences.front());
    j["differing_tensors"] = s.differences.size();
    j["differences"] = json::array();
    for (size_t i = 0; i < s.differences.size() && i < kListedDifferences; ++i)
      j["differences"].push_back(toJson(s.differences[i]));
  }
  if (s.diagnosis) j["diagnosis"] = toJson(*s.diagnosis);
  if ((s.savedPlain && s.savedCheckpoint) || (s.memoryPlain && s.memoryCheckpoint)) {
    j["memory"] = {{"result", s.memoryFinding ? "finding" : "holds"}};
    if (s.savedPlain && s.savedCheckpoint)  // the saved-tensor hooks' figure, beside the profiler's
      j["memory"].update({{"plain_bytes", *s.savedPlain},
                          {"checkpoint_bytes", *s.savedCheckpoint},
                          {"saving", *s.savedPlain > 0 ? saving(s) : 0.0}});
    if (s.memoryPlain && s.memoryCheckpoint) j["memory"]["profiler"] = toJson(*s.memoryPlain, *s.memoryCheckpoint);
    if (s.placementBytes) {
      j["memory"]["placement_bound_bytes"] = *s.placementBytes;
      j["memory"]["recomputed_modules"] = s.recomputed;
    }
    if (s.memoryFinding) j["memory"]["why"] = s.memoryWhy;
  }
  if (s.compiledPlain && s.compiledCheckpoint) {
    j["compiled_memory"] = {{"plain", *s.compiledPlain}, {"checkpoint", *s.compiledCheckpoint}};
    j["saved_residuals"] = {{"plain", s.residualsPlain}, {"checkpoint", s.residualsCheckpoint}};
  }
  if (compared(s) && !s.checkpointRaised)
    j["step_seconds"] = {{"plain", s.secondsPlain}, {"checkpoint", s.secondsCheckpoint}};
  if (s.plan) j["plan"] = planJson(r, *s.plan);
  if (s.shrunkFrom) j["shrunk_from_seed"] = *s.shrunkFrom;
  if (!s.instruments.empty()) {
    j["instruments"] = json::array();
    for (const auto& c : s.instruments) j["instruments"].push_back(toJson(c));
  }
  if (s.bitwiseFinding() || s.memoryFinding || s.planFinding()) j["replay"] = shellJoin(replayArgs(r, s));
  return j;
}

std::string resultName(int code) {
  switch (code) {
    case kExitOk:
      return "holds";
    case kExitFinding:
      return "finding";
    case kExitBadInput:
      return "bad-input";
    default:
      return "fault";
  }
}

std::string differenceLine(const SeedOutcome& s) {
  if (s.checkpointRaised) return s.error;
  std::string line = toText(s.differences.front());
  if (s.differences.size() > 1) line += " (+" + std::to_string(s.differences.size() - 1) + " more tensor(s))";
  return line;
}

std::string memoryLine(const SeedOutcome& s) {
  const bool profiled = s.memoryPlain && s.memoryCheckpoint;
  if ((!s.savedPlain || !s.savedCheckpoint) && !profiled) return "";
  std::string m = std::string("memory ") + (s.memoryFinding ? "FINDING" : "holds") + ":";
  if (profiled) m += " " + toText(*s.memoryPlain, *s.memoryCheckpoint) + ";";
  if (s.savedPlain && s.savedCheckpoint)
    m += std::string(s.compiledPlain ? " saved residual bytes" : " saved-tensor bytes") + " plain " +  // JAX's
         std::to_string(*s.savedPlain) + " B, checkpointed " + std::to_string(*s.savedCheckpoint) + " B";
  if (s.savedPlain && s.savedCheckpoint && *s.savedPlain > 0) m += " (" + fixed(100.0 * saving(s), 1) + "% saved)";
  if (s.placementBytes)
    m += ", placement bound " + std::to_string(*s.placementBytes) + " B (" + std::to_string(s.recomputed.size()) +
         " recomputed module(s))";
  const auto tp = compiledTemp(s.compiledPlain), tc = compiledTemp(s.compiledCheckpoint);
  if (tp && tc)
    m += "; XLA compiled temp plain " + std::to_string(*tp) + " B, checkpointed " + std::to_string(*tc) + " B" +
         (*tc >= *tp && *s.savedCheckpoint < *s.savedPlain ? " (the compiled step's temp bytes did not drop)" : "");
  if (s.secondsPlain > 0)
    m += "; step plain " + fixed(1e3 * s.secondsPlain, 2) + " ms, checkpointed " + fixed(1e3 * s.secondsCheckpoint, 2) +
         " ms (" + (s.secondsCheckpoint >= s.secondsPlain ? "+" : "") +
         fixed(100.0 * (s.secondsCheckpoint / s.secondsPlain - 1.0), 0) + "%)";
  return m;
}

}  // namespace

int UserModelReport::exitCode() const {
  bool finding = false, fault = false;
  for (const auto& s : seeds) {
    if (s.status == SeedOutcome::Status::kBadInput) return kExitBadInput;
    fault = fault || s.status == SeedOutcome::Status::kFault;
    finding = finding || s.status == SeedOutcome::Status::kFinding;
  }
  return fault ? kExitInfra : finding ? kExitFinding : kExitOk;
}

std::string UserModelReport::firstError() const {
  for (const auto& s : seeds)
    if (s.status == SeedOutcome::Status::kBadInput || s.status == SeedOutcome::Status::kFault)
      return "seed " + std::to_string(s.seed) + ": " + s.error;
  return "";
}

json userModelJson(const UserModelReport& r) {
  const UserModelOptions& o = *r.options;
  json j = {{"kind", "user-model"},
            {"adapter", r.spec.label},
            {"module", r.spec.module},
            {"factory", r.spec.factory},
            {"steps", o.steps},
            {"min_saving", o.minSaving},
            {"ulp", o.ulp},
            {"rounding_level_ulp", std::max(o.ulp, kRoundingLevelUlp)},
            {"driver_runs", r.driverRuns},
            {"exit_code", r.exitCode()},
            {"result", resultName(r.exitCode())}};
  j["seeds"] = json::array();
  j["findings"] = json::array();
  for (const auto& s : r.seeds) {
    j["seeds"].push_back(seedJson(r, s));
    if (s.bitwiseFinding()) {
      json f = {{"check", s.checkpointRaised ? "checkpoint-raised" : "bitwise"}, {"seed", s.seed}};
      if (!s.differences.empty()) {
        f["step"] = s.differences.front().step;
        f["tensor"] = s.differences.front().tensor;
      }
      if (s.diagnosis) f["class"] = findingClassName(s.diagnosis->cls);
      j["findings"].push_back(f);
    }
    if (s.memoryFinding) j["findings"].push_back({{"check", "memory"}, {"seed", s.seed}, {"why", s.memoryWhy}});
    if (s.planFinding()) j["findings"].push_back({{"check", "plan"}, {"seed", s.seed}, {"why", s.plan->why}});
  }
  if (r.shrunk) j["shrunk"] = seedJson(r, *r.shrunk);
  if (o.ulp > 0)
    j["ulp_note"] = "rounding-level differences within " + std::to_string(o.ulp) +
                    " ULP of their tensor's scale are accepted (" + ulpSource(r) + "), not bitwise equal";
  return j;
}

std::string userModelSummary(const UserModelReport& r) {
  const UserModelOptions& o = *r.options;
  std::ostringstream s;
  s << "validate " << r.spec.label << ": " << r.seeds.size() << " seed(s) x " << o.steps << " step(s), " << r.driverRuns
    << " runs\n";
  for (const auto& x : r.seeds) {
    s << "  seed " << x.seed;
    if (x.batchSize > 0) s << " (batch " << x.batchSize << ")";
    s << ": ";
    if (!compared(x)) {
      s << statusName(x.status) << ": " << x.error << "\n";
      continue;
    }
    const std::string b = bitwiseResult(x);
    s << "bitwise " << (b == "finding" ? "FINDING" : b);
    if (!x.differences.empty() || x.checkpointRaised) s << ": " << differenceLine(x);
    s << "\n";
    if (x.diagnosis) s << "    class " << findingClassName(x.diagnosis->cls) << ": " << x.diagnosis->why << "\n";
    if (const std::string m = memoryLine(x); !m.empty()) s << "    " << m << "\n";
    if (x.memoryFinding) s << "    " << x.memoryWhy << "\n";
    for (const auto& c : x.instruments)
      if (c.changed) s << "    instruments: " << c.describe() << "\n";
    if (x.plan) s << "    " << planLine(r, *x.plan) << "\n";
    if (x.planFinding()) s << "    " << x.plan->why << "\n";
  }
  if (r.shrunk) {
    const auto& x = *r.shrunk;
    s << "  shrunk: seed " << x.seed << ", batch " << x.batchSize << (x.zeroBatch ? " (values zeroed)" : "") << ", "
      << x.steps << " step(s): " << differenceLine(x) << "\n    runs in " << x.dir
      << "\n    replay: " << shellJoin(replayArgs(r, x)) << "\n";
  }
  if (o.ulp > 0)
    s << "  --ulp " << o.ulp << ": rounding-level differences within " << o.ulp
      << " ULP of their tensor's scale are accepted (" << ulpSource(r) << "), not bitwise equal\n";
  s << "result: " << resultName(r.exitCode()) << " (exit " << r.exitCode() << "); report "
    << (fs::path(o.outDir) / "validate.json").string() << "\n";
  return s.str();
}

std::string userModelMarkdown(const UserModelReport& r) {
  std::ostringstream s;
  s << "# ckptcheck validate: `" << r.spec.label << "`\n\nResult: **" << resultName(r.exitCode()) << "** (exit "
    << r.exitCode() << "); " << r.options->steps << " step(s) per seed; min saving "
    << fixed(100.0 * r.options->minSaving, 0) << "%";
  if (r.options->ulp > 0)
    s << "; differences within " << r.options->ulp << " ULP of their tensor's scale accepted (" << ulpSource(r) << ")";
  s << ".\n\n| seed | batch | bitwise | first difference | class | saved plain (B) | saved checkpointed (B) | "
       "memory | step plain (ms) | step checkpointed (ms) |\n|---|---|---|---|---|---|---|---|---|---|\n";
  for (const auto& x : r.seeds) {
    s << "| " << x.seed << " | " << x.batchSize << " | " << (compared(x) ? bitwiseResult(x) : statusName(x.status))
      << " | " << (x.differences.empty() && !x.checkpointRaised ? (compared(x) ? "" : x.error) : differenceLine(x))
      << " | " << (x.diagnosis ? findingClassName(x.diagnosis->cls) : "") << " | "
      << (x.savedPlain ? std::to_string(*x.savedPlain) : "") << " | "
      << (x.savedCheckpoint ? std::to_string(*x.savedCheckpoint) : "") << " | "
      << (x.savedPlain && x.savedCheckpoint ? (x.memoryFinding ? "finding" : "holds") : "") << " | "
      << (x.secondsPlain > 0 ? fixed(1e3 * x.secondsPlain, 2) : "") << " | "
      << (x.secondsCheckpoint > 0 ? fixed(1e3 * x.secondsCheckpoint, 2) : "") << " |\n";
  }
  for (const auto& x : r.seeds)
    if (x.compiledPlain && x.compiledCheckpoint) s << "\nSeed " << x.seed << ": " << memoryLine(x) << ".\n";
  if (r.shrunk)
    s << "\nShrunk: seed " << r.shrunk->seed << ", batch " << r.shrunk->batchSize << ", " << r.shrunk->steps
      << " step(s): " << differenceLine(*r.shrunk) << ". Replay: `" << shellJoin(replayArgs(r, *r.shrunk)) << "`\n";
  return s.str();
}

void writeUserModelReport(const UserModelReport& r, const std::string& outDir) {
  writeFileAtomic(fs::path(outDir) / "validate.json", userModelJson(r).dump(2) + "\n");
  writeFileAtomic(fs::path(outDir) / "validate.md", userModelMarkdown(r));
}

}  // namespace ckpt
