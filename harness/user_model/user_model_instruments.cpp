#include "harness/user_model/user_model_instruments.h"

#include <filesystem>
#include <sstream>

namespace ckpt {
namespace fs = std::filesystem;

namespace {

const char* instrumentName(const std::string& instrument) {
  if (instrument == "masks") return "the dropout-mask probe (forward hooks on the dropout modules)";
  if (instrument == "saved") return "the saved-tensor hooks (with the module placement probe)";
  if (instrument == "memory") return "the memory profiler";
  return "an instrument";
}

// The pass against the compared run of its mode; a pass that faults where the compared run trained changed it
// too (it raised where the user's run did not).
InstrumentCheck check(const std::string& instrument, const std::string& mode, const RunDump& compared,
                      const RunDump& pass) {
  InstrumentCheck c{instrument, mode, std::nullopt};
  if (pass.status != RunDump::Status::kOk) {
    Difference d;
    d.tensor = "the pass itself: " + pass.error;
    c.changed = d;
    return c;
  }
  const DumpComparison cmp = compareDumps(compared, pass);
  if (!cmp.differences.empty()) c.changed = cmp.differences.front();
  return c;
}

std::optional<StepMemory> stepMemory(const RunDump& d) {
  if (!d.memoryRecord) return std::nullopt;
  const nlohmann::json& j = *d.memoryRecord;
  StepMemory m{j.at("peak_bytes").get<int64_t>(),
               j.at("activation_bytes").get<int64_t>(),
               j.at("profiler_activation_bytes").get<int64_t>(),
               {},
               j.value("step", 0),
               j.value("first_call", false),
               std::nullopt};
  if (j.contains("peak_activation_bytes") && j["peak_activation_bytes"].is_number_integer())
    m.peakActivationBytes = j["peak_activation_bytes"].get<int64_t>();
  for (const auto& r : d.ranks) {
    const nlohmann::json& rm = r.contains("memory") && r["memory"].is_object() ? r["memory"] : nlohmann::json();
    if (!rm.is_object()) {  // a rank without a figure: rank 0's alone
      m.perRank.clear();
      return m;
    }
    m.perRank.emplace_back(rm.at("activation_bytes").get<int64_t>(), rm.at("peak_bytes").get<int64_t>());
  }
  return m;
}

}  // namespace

std::string InstrumentCheck::describe() const {
  const std::string run = mode == "plain" ? "the plain run" : "the checkpointed run";
  if (!changed) return std::string(instrumentName(instrument)) + " changed nothing in " + run;
  std::string what = changed->tensor;
  if (changed->tensor.rfind("the pass itself", 0) != 0)
    what += " differs at step " + std::to_string(changed->step) + ", " + std::to_string(changed->count) + " element(s)";
  return std::string(instrumentName(instrument)) + " changes what " + run + " computes (" + what +
         "): its evidence is dropped; the verdict is the uninstrumented runs'";
}

nlohmann::json toJson(const InstrumentCheck& c) {
  nlohmann::json j = {{"instrument", c.instrument}, {"mode", c.mode}, {"changed", c.changed.has_value()}};
  if (c.changed) j["why"] = c.describe();
  return j;
}

nlohmann::json toJson(const StepMemory& plain, const StepMemory& checkpointed) {
  const auto one = [](const StepMemory& m) {
    nlohmann::json j = {{"peak_bytes", m.peakBytes},
                        {"activation_bytes", m.activationBytes},
                        {"profiler_activation_bytes", m.profilerActivationBytes},
                        {"step", m.step},
                        {"first_call", m.firstCall}};
    if (m.peakActivationBytes) j["peak_activation_bytes"] = *m.peakActivationBytes;
    for (const auto& [activation, peak] : m.perRank)
      j["per_rank"].push_back({{"activation_bytes", activation}, {"peak_bytes", peak}});
    return j;
  };
  nlohmann::json j = {{"plain", one(plain)}, {"checkpoint", one(checkpointed)}};
  if (plain.activationBytes > 0)
    j["activation_saving"] = 1.0 - static_cast<double>(checkpointed.activationBytes) / plain.activationBytes;
  return j;
}

std::string toText(const StepMemory& plain, const StepMemory& checkpointed) {
  std::ostringstream s;
  s << "activation memory plain " << plain.activationBytes << " B, checkpointed " << checkpointed.activationBytes
    << " B";
  if (plain.activationBytes > 0) {
    s.precision(3);
    s << " (" << 100.0 * (1.0 - static_cast<double>(checkpointed.activationBytes) / plain.activationBytes)
      << "% saved)";
  }
  s << ", step peak " << plain.peakBytes << " / " << checkpointed.peakBytes << " B (torch.profiler, step "
    << checkpointed.step << ")";
  if (plain.firstCall || checkpointed.firstCall)
    s << "; the profiled step was the compiled model's first call, compilation included (--steps 2 or more "
         "profiles a compiled step)";
  return s.str();
}

MeasuringPasses runMeasuringPasses(const PassRunner& run, const RunDump& plain, const RunDump& checkpointed,
                                   const std::string& dir) {
  MeasuringPasses m;
  const std::array<const RunDump*, 2> compared = {&plain, &checkpointed};
  const std::array<std::string, 2> modes = {"plain", "checkpoint"};
  for (size_t i = 0; i < 2; ++i) {
    const RunDump saved = run(modes[i], (fs::path(dir) / (modes[i] + "-saved")).string(), "saved");
    m.checks.push_back(check("saved", modes[i], *compared[i], saved));
    if (!m.checks.back().changed) m.saved[i] = saved;
    const RunDump memory = run(modes[i], (fs::path(dir) / (modes[i] + "-memory")).string(), "memory");
    if (memory.status == RunDump::Status::kCrashed && m.fault.empty()) {
      m.fault = "the " + modes[i] + " run's memory pass: " + memory.error;  // a fault of the measure, exit 3
      continue;
    }
    m.checks.push_back(check("memory", modes[i], *compared[i], memory));
    if (!m.checks.back().changed) m.memory[i] = stepMemory(memory);
  }
  return m;
}

std::vector<TensorEvidence> maskEvidence(const PassRunner& run, const RunDump& plain, const RunDump& checkpointed,
                                         const std::string& dir, std::vector<InstrumentCheck>& checks) {
  const RunDump p = run("plain", (fs::path(dir) / "plain-masks").string(), "masks");
  const RunDump c = run("checkpoint", (fs::path(dir) / "checkpoint-masks").string(), "masks");
  checks.push_back(check("masks", "plain", plain, p));
  const bool plainKept = !checks.back().changed;
  checks.push_back(check("masks", "checkpoint", checkpointed, c));
  if (!plainKept || checks.back().changed) return {};
  std::vector<TensorEvidence> masks;
  for (auto& e : compareDumps(p, c).evidence)
    if (e.kind == TensorKind::kMask) masks.push_back(std::move(e));
  return masks;
}

}  // namespace ckpt
