#include "harness/validate/adapter.h"

#include <pwd.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "cases/block_kind.h"
#include "cases/compute_precision.h"
#include "cases/lm_case.h"
#include "cases/micro_batches.h"
#include "cases/param_sharing.h"
#include "cases/user_file.h"
#include "common/input_error.h"

namespace ckpt {
namespace fs = std::filesystem;
using nlohmann::json;

namespace {

const std::vector<std::string> kBuiltins = {"numpy", "torch", "jax"};

bool holdsAdapters(const fs::path& dir) {
  std::error_code ec;
  return fs::is_directory(dir / "harness" / "adapters" / "common", ec);
}

std::string oneLine(std::string s) {
  for (char& c : s)
    if (c == '\n' || c == '\r') c = ' ';
  return s;
}

// The end of a log, indented, for an error message.
std::string logTail(const std::string& path) {
  std::string t = fileTail(path, 1500);
  while (!t.empty() && (t.back() == '\n' || t.back() == ' ')) t.pop_back();
  if (t.empty()) return "";
  std::string out = "\n  --- end of " + path + " ---\n  ";
  for (char c : t) out += c == '\n' ? std::string("\n  ") : std::string(1, c);
  return out;
}

std::set<std::string> stringSet(const json& j, const std::string& key, bool required) {
  std::set<std::string> s;
  if (!j.contains(key)) {
    if (required) throw AdapterError("adapter capabilities: '" + key + "' missing");
    return s;
  }
  if (!j.at(key).is_array()) throw AdapterError("adapter capabilities: '" + key + "' must be an array of strings");
  for (const auto& v : j.at(key)) {
    if (!v.is_string()) throw AdapterError("adapter capabilities: '" + key + "' must be an array of strings");
    s.insert(v.get<std::string>());
  }
  return s;
}

bool flag(const json& j, const std::string& key) {
  return j.contains(key) && j.at(key).is_boolean() && j.at(key).get<bool>();
}

}  // namespace

std::string adapterSourceDir() {
  if (const char* env = std::getenv("CKPT_SOURCE_DIR"); env && *env) {
    if (!holdsAdapters(env))
      throw InputError(std::string("CKPT_SOURCE_DIR='") + env + "' holds no harness/adapters/common");
    return env;
  }
#if defined(CKPT_SOURCE_DIR_DEFAULT)
  if (holdsAdapters(CKPT_SOURCE_DIR_DEFAULT)) return CKPT_SOURCE_DIR_DEFAULT;
#endif
  std::error_code ec;
  const fs::path exe = fs::read_symlink("/proc/self/exe", ec);
  if (!ec) {
    for (fs::path p = exe.parent_path(); !p.empty() && p != p.root_path(); p = p.parent_path())
      if (holdsAdapters(p)) return p.string();
  }
  throw InputError("cannot find the built-in adapters (harness/adapters): set CKPT_SOURCE_DIR to the source tree");
}

std::string adapterPython() {
  if (const char* env = std::getenv("CKPT_PYTHON"); env && *env) return env;
  const char* home = std::getenv("HOME");
  if (!home || !*home) {
    const passwd* pw = getpwuid(getuid());
    home = pw ? pw->pw_dir : nullptr;
  }
  if (home && *home) {
    const fs::path venv = fs::path(home) / ".cache" / "ckptcheck" / "venv" / "bin" / "python";
    std::error_code ec;
    if (fs::exists(venv, ec)) return venv.string();
  }
  return "python3";
}

void addOption(AdapterSpec& spec, const std::string& kv) {
  const size_t eq = kv.find('=');
  if (eq == std::string::npos || eq == 0) throw InputError("adapter option '" + kv + "': expected KEY=VALUE");
  spec.options[kv.substr(0, eq)] = kv.substr(eq + 1);
}

AdapterSpec builtinAdapter(const std::string& text) {
  const size_t colon = text.find(':');
  const std::string name = text.substr(0, colon);
  bool known = false;
  for (const auto& b : kBuiltins) known = known || b == name;
  if (!known) {
    std::string all;
    for (const auto& b : kBuiltins) all += (all.empty() ? "" : ", ") + b;
    throw InputError("--adapter '" + name + "': unknown built-in adapter (expected one of: " + all +
                     "; any other command is --adapter-cmd)");
  }
  AdapterSpec s;
  s.name = name;
  if (colon != std::string::npos) {
    std::stringstream ss(text.substr(colon + 1));
    std::string kv;
    while (std::getline(ss, kv, ','))
      if (!kv.empty()) addOption(s, kv);
  }
  const fs::path script = fs::path(adapterSourceDir()) / "harness" / "adapters" / name / "adapter.py";
  if (!fs::exists(script)) throw InputError("built-in adapter '" + name + "': " + script.string() + " is missing");
  s.argv = {adapterPython(), script.string()};
  s.label = text;
  s.replayArgs = {"--adapter", text};
  return s;
}

AdapterSpec commandAdapter(const std::string& commandLine) {
  AdapterSpec s;
  s.name = "custom";
  s.argv = splitCommandLine(commandLine);
  s.label = commandLine;
  s.replayArgs = {"--adapter-cmd", commandLine};
  return s;
}

GenLimits Capabilities::limits(int maxBlocks, int maxSteps) const {
  GenLimits l;
  l.maxBlocks = maxBlocks;
  l.maxSteps = maxSteps;
  for (BlockKind k : blockKinds())
    if (!blocks.count(k->name)) l.excludedKinds.push_back(k);
  l.dropout = dropout;
  l.floatType = dtypes.count("float");
  l.doubleType = dtypes.count("double");
  l.statefulRng = rng.count("stateful");
  l.counterRng = rng.count("counter");
  l.frozen = paramFeatures.count("frozen");
  l.share = paramFeatures.count("shared");
  l.noInputGrad = paramFeatures.count("no_input_grad");
  l.microBatches = paramFeatures.count("micro_batches");
  l.tokens = inputs.count("tokens");
  l.dropPath = dropPath;
  l.rrelu = activations.count("rrelu");
  l.bf16 = compute.count("bf16");
  return l;
}

std::string Capabilities::unsupported(const CaseSpec& c) const {
  for (const auto& b : c.blocks) {
    const BlockKindDef& d = *b.kind;
    if (!blocks.count(d.name)) return std::string("block kind ") + d.name;
    // What the block's fields need: an adapter lists the activations it supports.
    for (const auto& [what, value] : d.needs(b)) {
      if (what == "activation" && !activations.count(value)) return what + " " + value;
      if (what == "drop_path" && !dropPath)
        return "drop_path (stochastic depth; the adapter's capabilities do not say \"drop_path\": true)";
    }
  }
  if (bf16Compute(c) && !compute.count("bf16"))
    return "bf16 compute (the adapter's capabilities list no \"bf16\" in \"compute\")";
  if (!losses.count(lossKindName(c.loss))) return std::string("loss ") + lossKindName(c.loss);
  if (!dtypes.count(dtypeName(c.dtype))) return std::string("dtype ") + dtypeName(c.dtype);
  if (!rng.count(rngModelName(c.rng))) return std::string("rng ") + rngModelName(c.rng);
  if (c.dropout > 0 && !dropout) return "dropout";
  if (hasFrozenBlock(c) && !paramFeatures.count("frozen")) return "frozen blocks";
  if (hasSharedBlock(c) && !paramFeatures.count("shared")) return "shared parameters";
  if (isLanguageModel(c) && !inputs.count("tokens"))
    return "token input (a language-model case; the adapter's capabilities list no \"tokens\" in \"inputs\")";
  if (!c.inputGrad && !paramFeatures.count("no_input_grad"))
    return isLanguageModel(c) ? "frozen embedding (the adapter's capabilities list no \"no_input_grad\")"
                              : "an input without gradient";
  if (hasMicroBatches(c) && !paramFeatures.count("micro_batches")) return "micro-batches";
  return "";
}

void Capabilities::checkOptions(const std::map<std::string, std::string>& opts) const {
  for (const auto& [k, v] : opts) {
    const auto it = options.find(k);
    if (it == options.end()) {
      std::string all;
      for (const auto& [n, _] : options) all += (all.empty() ? "" : ", ") + n;
      throw InputError("adapter option '" + k + "': " + framework +
                       " adapter has no such option (it has: " + (all.empty() ? "none" : all) + ")");
    }
    const OptionSpec& o = it->second;
    if (o.isInt) {
      char* end = nullptr;
      const long x = std::strtol(v.c_str(), &end, 10);
      if (v.empty() || *end != '\0' || x < 1)
        throw InputError("adapter option '" + k + "=" + v + "': must be a positive integer");
    } else if (!o.values.empty() && std::find(o.values.begin(), o.values.end(), v) == o.values.end()) {
      std::string all;
      for (const auto& a : o.values) all += (all.empty() ? "" : ", ") + a;
      throw InputError("adapter option '" + k + "=" + v + "': must be one of " + all);
    }
  }
}

Capabilities parseCapabilities(const json& j) {
  if (!j.is_object()) throw AdapterError("adapter capabilities: not a JSON object");
  Capabilities c;
  c.raw = j;
  if (!j.contains("protocol") || !j.at("protocol").is_number_integer())
    throw AdapterError("adapter capabilities: 'protocol' missing");
  c.protocol = j.at("protocol").get<int>();
  if (c.protocol != kProtocolVersion)
    throw AdapterError("adapter speaks protocol " + std::to_string(c.protocol) + "; this ckptcheck speaks " +
                       std::to_string(kProtocolVersion));
  c.framework = j.value("framework", "unknown");
  c.version = j.value("version", "unknown");
  c.blocks = stringSet(j, "blocks", true);
  c.activations = stringSet(j, "activations", false);
  if (c.activations.empty()) c.activations = {"relu", "gelu", "tanh"};
  c.losses = stringSet(j, "losses", false);
  if (c.losses.empty()) c.losses = {"cross_entropy", "mse"};
  c.dtypes = stringSet(j, "dtypes", true);
  c.rng = stringSet(j, "rng", false);
  if (c.rng.empty()) c.rng = {"stateful"};
  c.modes = stringSet(j, "modes", false);
  c.paramFeatures = stringSet(j, "params", false);
  c.inputs = stringSet(j, "inputs", false);  // absent: dense only, as every adapter before token cases
  if (c.inputs.empty()) c.inputs = {"dense"};
  c.dropout = flag(j, "dropout");
  c.dropPath = flag(j, "drop_path");
  c.compute = stringSet(j, "compute", false);  // absent: exact only, as every adapter before bf16 compute
  if (c.compute.empty()) c.compute = {"exact"};
  c.reportsMemory = flag(j, "reports_memory");
  c.reportsForwardCalls = flag(j, "reports_forward_calls");
  c.reportsRngState = flag(j, "reports_rng_state");
  c.serve = flag(j, "serve");
  if (c.blocks.empty() || c.dtypes.empty()) throw AdapterError("adapter capabilities: no block kinds or no dtypes");
  if (j.contains("options")) {
    if (!j.at("options").is_object()) throw AdapterError("adapter capabilities: 'options' must be an object");
    for (const auto& [k, v] : j.at("options").items()) {
      OptionSpec o;
      if (v.is_object()) {
        if (v.contains("values") && v.at("values").is_string() && v.at("values").get<std::string>() == "int")
          o.isInt = true;
        else if (v.contains("values") && v.at("values").is_array())
          for (const auto& x : v.at("values")) o.values.push_back(x.is_string() ? x.get<std::string>() : x.dump());
        if (v.contains("default"))
          o.defaultValue = v.at("default").is_string() ? v.at("default").get<std::string>() : v.at("default").dump();
        o.doc = v.value("doc", "");
      }
      c.options[k] = o;
    }
  }
  return c;
}

RunMeta readRunMeta(const std::string& outDir, int steps, int blocks) {
  const fs::path p = fs::path(outDir) / "meta.json";
  std::ifstream in(p);
  if (!in) throw AdapterError("adapter output " + p.string() + ": missing");
  RunMeta m;
  std::stringstream text;
  text << in.rdbuf();
  try {  // nested at most 100 levels (cases/user_file.h): messages and reports print parts of it
    m.raw = parseUserJson(text.str(), "adapter output " + p.string());
  } catch (const InputError& e) {
    throw AdapterError(e.what());  // the adapter's fault, not the user's input
  }
  const json& j = m.raw;
  auto bad = [&](const std::string& what) { return AdapterError("adapter output " + p.string() + ": " + what); };
  try {
    if (j.contains("saved_activation_bytes") && !j.at("saved_activation_bytes").is_null()) {
      m.savedBytes = j.at("saved_activation_bytes").get<std::vector<int64_t>>();
      if (static_cast<int>(m.savedBytes->size()) != steps) throw bad("saved_activation_bytes needs one entry per step");
    }
    if (j.contains("forward_calls") && !j.at("forward_calls").is_null()) {
      m.forwardCalls = j.at("forward_calls").get<std::vector<std::vector<int64_t>>>();
      if (static_cast<int>(m.forwardCalls->size()) != steps) throw bad("forward_calls needs one list per step");
      for (const auto& s : *m.forwardCalls)
        if (static_cast<int>(s.size()) != blocks) throw bad("forward_calls needs one count per block");
    }
    if (j.contains("recomputed_blocks") && !j.at("recomputed_blocks").is_null())
      m.recomputedBlocks = j.at("recomputed_blocks").get<std::vector<int>>();
    if (j.contains("recompute_counts") && !j.at("recompute_counts").is_null()) {
      m.recomputeCounts = j.at("recompute_counts").get<std::vector<std::vector<int64_t>>>();
      if (static_cast<int>(m.recomputeCounts->size()) != steps) throw bad("recompute_counts needs one list per step");
      for (const auto& s : *m.recomputeCounts) {
        if (static_cast<int>(s.size()) != blocks) throw bad("recompute_counts needs one count per block");
        for (int64_t n : s)
          if (n < 0) throw bad("recompute_counts must be >= 0");
      }
    }
    if (j.contains("instruments_changed") && !j.at("instruments_changed").is_null())
      m.instrumentsChanged = j.at("instruments_changed").get<std::string>();
    if (j.contains("step_seconds") && !j.at("step_seconds").is_null())
      m.stepSeconds = j.at("step_seconds").get<std::vector<double>>();
  } catch (const json::exception& e) {
    throw bad(oneLine(e.what()));
  }
  return m;
}

AdapterClient::AdapterClient(AdapterSpec spec, double timeoutSeconds, std::string logDir, bool allowServe)
    : spec_(std::move(spec)), timeout_(timeoutSeconds), logDir_(std::move(logDir)), allowServe_(allowServe) {
  fs::create_directories(logDir_);
}

AdapterClient::~AdapterClient() {
  if (server_) server_->stop(2.0);
}

const Capabilities& AdapterClient::capabilities() {
  if (caps_) return *caps_;
  const std::string out = (fs::path(logDir_) / "capabilities.stdout").string();
  const std::string err = (fs::path(logDir_) / "capabilities.stderr").string();
  fs::remove(out);
  fs::remove(err);
  std::vector<std::string> argv = spec_.argv;
  argv.push_back("capabilities");
  const ProcessResult r = runProcess(argv, out, err, timeout_);
  if (!r.ok()) throw AdapterError("adapter '" + spec_.label + "' capabilities query: " + r.describe() + logTail(err));
  std::ifstream in(out);
  std::stringstream ss;
  ss << in.rdbuf();
  json j;
  try {  // nested at most 100 levels: an option's values are printed
    j = parseUserJson(ss.str(), "adapter '" + spec_.label + "' capabilities");
  } catch (const InputError& e) {
    throw AdapterError(e.what() + logTail(out));
  }
  caps_ = parseCapabilities(j);
  return *caps_;
}

void AdapterClient::runProcessMode(const std::string& caseDir, const std::string& outDir, const std::string& mode) {
  std::vector<std::string> argv = spec_.argv;
  for (const std::string a : {"run", "--case-dir"}) argv.push_back(a);
  argv.push_back(caseDir);
  argv.push_back("--out-dir");
  argv.push_back(outDir);
  argv.push_back("--mode");
  argv.push_back(mode);
  for (const auto& [k, v] : spec_.options) {
    argv.push_back("--option");
    argv.push_back(k + "=" + v);
  }
  const std::string err = (fs::path(outDir) / "adapter.stderr").string();
  const ProcessResult r = runProcess(argv, (fs::path(outDir) / "adapter.stdout").string(), err, timeout_);
  if (r.started && !r.timedOut && r.signal == 0 && r.exitCode == 2)
    throw InputError("adapter '" + spec_.label + "' refused the request (exit code 2): " + oneLine(fileTail(err, 400)));
  if (!r.ok()) throw AdapterError("adapter '" + spec_.label + "' run (" + mode + ") " + r.describe() + logTail(err));
}

void AdapterClient::runServe(const std::string& caseDir, const std::string& outDir, const std::string& mode) {
  const std::string err = (fs::path(logDir_) / "serve.stderr").string();
  if (!server_ || !server_->running()) {
    server_ = std::make_unique<ServeProcess>();
    std::vector<std::string> argv = spec_.argv;
    argv.push_back("serve");
    std::string why;
    if (!server_->start(argv, err, why)) throw AdapterError("adapter '" + spec_.label + "' serve: " + why);
  }
  json req = {
      {"command", "run"}, {"case_dir", caseDir}, {"out_dir", outDir}, {"mode", mode}, {"options", spec_.options}};
  std::string reply, why;
  if (!server_->request(req.dump(), reply, timeout_, why))
    throw AdapterError("adapter '" + spec_.label + "' serve (" + mode + "): " + why + logTail(err));
  json r;
  try {
    r = json::parse(reply);
  } catch (const json::parse_error&) {
  }
  if (!r.is_object()) {
    server_->stop(1.0);
    throw AdapterError("adapter '" + spec_.label + "' serve: the reply is not a JSON object: " + reply.substr(0, 200));
  }
  if (r.contains("ok") && r.at("ok").is_boolean() && r.at("ok").get<bool>()) return;
  const std::string msg =
      r.contains("error") && r.at("error").is_string() ? r.at("error").get<std::string>() : "(no message)";
  if (r.contains("bad_request") && r.at("bad_request").is_boolean() && r.at("bad_request").get<bool>())
    throw InputError("adapter '" + spec_.label + "' refused the request: " + oneLine(msg));
  throw AdapterError("adapter '" + spec_.label + "' run (" + mode + ") failed: " + oneLine(msg) + logTail(err));
}

RunMeta AdapterClient::run(const std::string& caseDir, const std::string& outDir, const std::string& mode, int steps,
                           int blocks) {
  fs::remove_all(outDir);
  fs::create_directories(outDir);
  ++runs_;
  const std::string absCase = fs::absolute(caseDir).string(), absOut = fs::absolute(outDir).string();
  if (allowServe_ && capabilities().serve) runServe(absCase, absOut, mode);
  else runProcessMode(absCase, absOut, mode);
  return readRunMeta(absOut, steps, blocks);
}

}  // namespace ckpt
