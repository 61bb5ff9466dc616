#include "harness/user_model/user_model_run.h"

#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>
#include <tuple>

#include "common/input_error.h"
#include "harness/validate/adapter.h"
#include "harness/validate/case_dir.h"
#include "harness/user_model/fork_server.h"
#include "harness/validate/npy.h"
#include "harness/validate/runner.h"

namespace ckpt {
namespace fs = std::filesystem;
using nlohmann::json;

namespace {

// The driver's exit codes (user_model.py).
constexpr int kDriverBadFactory = 2;
constexpr int kDriverRaised = 4;
constexpr int kDriverInfra = 5;  // torch.compile failed, or the profiler recorded no memory: a fault

std::string oneLine(std::string s) {
  for (char& c : s)
    if (c == '\n' || c == '\r') c = ' ';
  while (!s.empty() && s.back() == ' ') s.pop_back();
  return s.size() > 400 ? s.substr(0, 400) + "..." : s;
}

// The user's module=VALUE: "PATH.py" or "PATH.py:FACTORY". The factory is split at the last ':' after ".py" so
// a path may itself contain ':'.
void splitModule(const std::string& value, std::string& path, std::string& factory) {
  const size_t py = value.rfind(".py");
  const size_t colon = py == std::string::npos ? value.rfind(':') : value.find(':', py);
  path = value.substr(0, colon);
  factory = colon == std::string::npos ? "factory" : value.substr(colon + 1);
}

}  // namespace

bool isUserModelSpec(const std::string& adapter, const std::vector<std::string>& options) {
  if (adapter.find("module=") != std::string::npos) return true;
  for (const auto& o : options)
    if (o.rfind("module=", 0) == 0) return true;
  return false;
}

UserModelSpec parseUserModelSpec(const std::string& adapter, const std::vector<std::string>& options) {
  const size_t colon = adapter.find(':');
  const std::string name = adapter.substr(0, colon);
  if (name != "torch" && name != "jax")
    throw InputError("--adapter '" + adapter +
                     "': module= (your own model) is supported by the torch and jax adapters only");
  // Only the first ':' separates NAME from its options; the module value may hold ':' (PATH.py:FACTORY), so it
  // runs up to the next ',' as every other option does.
  std::vector<std::string> kvs;
  if (colon != std::string::npos) {
    std::stringstream ss(adapter.substr(colon + 1));
    for (std::string kv; std::getline(ss, kv, ',');)
      if (!kv.empty()) kvs.push_back(kv);
  }
  kvs.insert(kvs.end(), options.begin(), options.end());
  std::string module;
  UserModelSpec s;
  for (const auto& kv : kvs) {
    const size_t eq = kv.find('=');
    if (eq == std::string::npos || eq == 0) throw InputError("adapter option '" + kv + "': expected KEY=VALUE");
    const std::string key = kv.substr(0, eq), value = kv.substr(eq + 1);
    if (key == "module") {
      module = value;
    } else if (name == "torch" && key == "nnodes") {
      const int n = std::atoi(value.c_str());
      if (n < 1 || n > 4096 || std::to_string(n) != value)
        throw InputError("adapter option 'nnodes=" + value + "': expected a number of machines from 1 to 4096");
      s.nnodes = n;
    } else if (name == "torch" && key == "rdzv_endpoint") {
      const size_t c = value.rfind(':');
      const std::string port = c == std::string::npos ? "" : value.substr(c + 1);
      const int p = std::atoi(port.c_str());
      if (c == 0 || c == std::string::npos || p < 1 || p > 65535 || std::to_string(p) != port)
        throw InputError("adapter option 'rdzv_endpoint=" + value + "': expected HOST:PORT, a port from 1 to 65535");
      s.rdzvEndpoint = value;
    } else {
      throw InputError("adapter option '" + key +
                       "': not available with module= (a user model takes its settings "
                       "from its factory; torch also takes nnodes= and rdzv_endpoint=)");
    }
  }
  if (s.nnodes > 1 && s.rdzvEndpoint.empty())
    throw InputError("adapter option 'nnodes=" + std::to_string(s.nnodes) +
                     "' needs rdzv_endpoint=HOST:PORT (node 0's rendezvous, which the other nodes join)");
  s.label = adapter;
  s.framework = name;
  splitModule(module, s.module, s.factory);
  if (s.module.empty()) throw InputError("--adapter '" + adapter + "': module= needs a PATH.py[:FACTORY]");
  if (s.factory.empty()) throw InputError("--adapter '" + adapter + "': empty factory name after ':'");
  std::error_code ec;
  if (!fs::is_regular_file(s.module, ec))
    throw InputError("--adapter '" + adapter + "': module file '" + s.module + "' does not exist");
  s.module = fs::absolute(s.module).string();
  return s;
}

RunDump runDriver(const UserModelSpec& spec, const DriverRequest& req) {
  RunDump d;
  d.dir = fs::absolute(req.dir).string();
  fs::remove_all(d.dir);
  fs::create_directories(d.dir);
  const fs::path script = fs::path(adapterSourceDir()) / "harness" / "user_model" / spec.framework / "user_model.py";
  std::vector<std::string> argv = {script.string(),
                                   "--module",
                                   spec.module,
                                   "--factory",
                                   spec.factory,
                                   "--seed",
                                   std::to_string(req.seed),
                                   "--steps",
                                   std::to_string(req.steps),
                                   "--mode",
                                   req.mode,
                                   "--out",
                                   d.dir};
  if (req.batchSize > 0) {
    argv.push_back("--batch-size");
    argv.push_back(std::to_string(req.batchSize));
  }
  if (req.zeroBatch) argv.push_back("--zero-batch");
  if (spec.nnodes > 1 || !spec.rdzvEndpoint.empty()) {
    argv.insert(argv.end(), {"--nnodes", std::to_string(spec.nnodes)});
    if (!spec.rdzvEndpoint.empty()) argv.insert(argv.end(), {"--rdzv-endpoint", spec.rdzvEndpoint});
  }
  if (req.randomnessOff) argv.push_back("--randomness-off");
  if (!req.plan.empty() && req.mode == "checkpoint") {
    argv.push_back("--plan");
    argv.push_back(fs::absolute(req.plan).string());
    if (req.instruments == "saved") {  // the pass that measures the placement times it too, after its dumps
      argv.push_back("--timing-pairs");
      argv.push_back(std::to_string(kPlanTimingPairs));
    }
  }
  if (!req.instruments.empty()) {
    argv.push_back("--instruments");
    argv.push_back(req.instruments);
  }
  const std::string err = (fs::path(d.dir) / "driver.stderr").string();
  // Forked from an interpreter that imported the driver's and the module's imports once (fork_server.h).
  const ProcessResult r =
      pythonForkServer().run({"--preload-script", script.string(), "--preload-imports-of", spec.module}, argv,
                             (fs::path(d.dir) / "driver.stdout").string(), err, req.timeoutSeconds);
  json j;
  std::ifstream in(fs::path(d.dir) / "index.json");
  const bool haveIndex = static_cast<bool>(in);
  if (haveIndex) {
    try {
      j = json::parse(in);
    } catch (const json::exception&) {
      j = json();
    }
  }
  const bool known =
      r.started && !r.timedOut && r.signal == 0 &&
      (r.exitCode == 0 || r.exitCode == kDriverBadFactory || r.exitCode == kDriverRaised || r.exitCode == kDriverInfra);
  if (!known || !j.is_object()) {
    d.status = RunDump::Status::kCrashed;
    const std::string tail = oneLine(fileTail(err, 300));
    d.error = "the " + req.mode + " run " + r.describe() + (j.is_object() ? "" : " without writing index.json") +
              (tail.empty() ? "" : ": " + tail);
    return d;
  }
  d.phase = j.value("phase", "");
  if (r.exitCode != 0) {
    d.status = r.exitCode == kDriverBadFactory ? RunDump::Status::kBadFactory
               : r.exitCode == kDriverInfra    ? RunDump::Status::kCrashed
                                               : RunDump::Status::kRaised;
    d.error = j.contains("error") ? oneLine(j["error"].value("message", "")) : "(no message)";
    if (r.exitCode == kDriverInfra) d.error = "the " + req.mode + " run (" + d.phase + "): " + d.error;
  }
  try {
    if (j.contains("saved_activation_bytes") && j["saved_activation_bytes"].is_number_integer())
      d.savedBytes = j["saved_activation_bytes"].get<int64_t>();
    if (j.contains("step_seconds")) d.stepSeconds = j["step_seconds"].get<std::vector<double>>();
    d.batchSize = j.value("batch_size", 0);
    d.zeroedTensors = j.value("zeroed_tensors", int64_t{0});
    if (j.contains("plan") && j["plan"].is_object()) d.planRecord = j["plan"];
    if (j.contains("memory") && j["memory"].is_object()) d.memoryRecord = j["memory"];
    if (j.contains("compiled_memory") && j["compiled_memory"].is_object()) d.compiledMemory = j["compiled_memory"];
    if (j.contains("saved_residuals") && j["saved_residuals"].is_array()) d.savedResiduals = j["saved_residuals"];
    if (j.contains("momenta")) d.momenta = j["momenta"].get<std::map<std::string, double>>();
    if (j.contains("ranks") && j["ranks"].is_array()) d.ranks = j["ranks"];
    const json shards = j.value("shards", json::object());  // named: items() refers into it
    for (const auto& [name, rows] : shards.items())
      d.shardRows[name] = {rows.at(0).get<int64_t>(), rows.at(1).get<int64_t>()};
    if (j.contains("placement") && j["placement"].is_object()) {
      const json& p = j["placement"];
      Placement pl;
      pl.calls = p.at("forward_calls").get<std::map<std::string, int64_t>>();
      for (const auto& [name, list] : p.at("module_inputs").items())
        for (const auto& e : list) pl.inputs[name].emplace_back(e.at(0).get<uint64_t>(), e.at(1).get<int64_t>());
      for (const auto& e : p.at("pack_events"))
        pl.packs.push_back({e.at(0).get<uint64_t>(), e.at(1).get<int64_t>(), e.at(2).get<std::vector<std::string>>()});
      d.placement = std::move(pl);
    }
    for (const auto& t : j.value("tensors", json::array()))
      d.tensors.push_back({t.at("step").get<int>(), t.at("kind").get<std::string>(), t.at("name").get<std::string>(),
                           t.at("file").is_null() ? "" : t.at("file").get<std::string>()});
  } catch (const json::exception& e) {
    d.status = RunDump::Status::kCrashed;
    d.error = "the " + req.mode + " run wrote a malformed index.json: " + oneLine(e.what());
  }
  return d;
}

std::optional<PlacementBound> placementBound(const RunDump& plain, const RunDump& checkpointed) {
  if (!plain.placement || !checkpointed.placement) return std::nullopt;
  const auto& before = plain.placement->calls;
  std::set<std::string> recomputed;
  for (const auto& [name, n] : checkpointed.placement->calls) {
    const auto it = before.find(name);
    if (n > (it == before.end() ? 0 : it->second)) recomputed.insert(name);
  }
  // Outermost only: "blocks.0.fc1" goes when "blocks.0" is recomputed.
  auto inside = [&](const std::string& name) {
    for (size_t dot = name.find('.'); dot != std::string::npos; dot = name.find('.', dot + 1))
      if (recomputed.count(name.substr(0, dot))) return true;
    return false;
  };
  PlacementBound b;
  for (const auto& name : recomputed)
    if (!inside(name)) b.recomputed.push_back(name);
  if (b.recomputed.empty()) return std::nullopt;
  const std::set<std::string> outer(b.recomputed.begin(), b.recomputed.end());
  std::map<uint64_t, int64_t> kept;  // storage -> bytes: saved outside every recomputed module, or an input of one
  for (const auto& p : plain.placement->packs) {
    bool under = false;
    for (const auto& m : p.stack) under = under || outer.count(m) > 0;
    if (!under) kept[p.ptr] = p.bytes;
  }
  for (const auto& name : b.recomputed) {
    const auto it = plain.placement->inputs.find(name);
    if (it != plain.placement->inputs.end())
      for (const auto& [ptr, bytes] : it->second) kept[ptr] = bytes;
  }
  for (const auto& [ptr, bytes] : kept) b.bytes += bytes;
  return b;
}

std::string kindLabel(const std::string& kind) {
  if (kind == "grad") return "gradient";
  if (kind == "param") return "parameter after the step";
  if (kind == "rng") return "generator state";
  return kind;
}

namespace {

TensorKind tensorKind(const std::string& kind) {
  if (kind == "loss") return TensorKind::kLoss;
  if (kind == "grad") return TensorKind::kGradient;
  if (kind == "buffer") return TensorKind::kState;
  if (kind == "param") return TensorKind::kParameter;
  if (kind == "rng") return TensorKind::kRng;
  return TensorKind::kMask;
}

struct Loaded {
  NpyArray a;
  bool present = false;
};

Loaded load(const RunDump& d, const DumpedTensor& t) {
  Loaded l;
  if (t.file.empty()) return l;
  try {
    l.a = readNpy((fs::path(d.dir) / t.file).string());
  } catch (const NpyError& e) {
    throw AdapterError(std::string("user model dump: ") + e.what());
  }
  l.present = true;
  return l;
}

bool isFloating(NpyType t) { return t == NpyType::kFloat32 || t == NpyType::kFloat64; }

std::vector<double> asDoubles(const NpyArray& a, const std::string& origin) {
  if (a.type == NpyType::kFloat32) {
    const auto v = npyValues<float>(a, origin, false);
    return {v.begin(), v.end()};
  }
  if (a.type == NpyType::kFloat64) return npyValues<double>(a, origin, false);
  const auto v = npyValues<double>(a, origin, true);
  return v;
}

std::vector<int64_t> asIntegers(const NpyArray& a) {
  std::vector<int64_t> v(static_cast<size_t>(a.count()));
  const int size = npyItemSize(a.type);
  for (size_t i = 0; i < v.size(); ++i) {
    const unsigned char* p = a.bytes.data() + i * size;
    if (a.type == NpyType::kInt64) {
      std::memcpy(&v[i], p, 8);
    } else if (a.type == NpyType::kInt32) {
      int32_t x;
      std::memcpy(&x, p, 4);
      v[i] = x;
    } else {
      v[i] = *p;  // uint8, bool
    }
  }
  return v;
}

// Both present: bit for bit, by type. One absent: a difference of its own (a missing gradient).
std::optional<Difference> compareOne(const DumpedTensor& t, const Loaded& x, const Loaded& y) {
  const std::string label = t.kind + " " + t.name;
  Difference shape;
  shape.step = t.step;
  shape.tensor = label;
  if (x.present != y.present) {
    shape.shape = x.present ? "present vs absent" : "absent vs present";
    shape.count = x.present ? x.a.count() : y.a.count();
    return shape;
  }
  if (!x.present) return std::nullopt;
  if (x.a.type != y.a.type || x.a.shape != y.a.shape) {
    shape.shape =
        std::string(npyDescr(x.a.type)) + shapeText(x.a.shape) + " vs " + npyDescr(y.a.type) + shapeText(y.a.shape);
    shape.count = std::max(x.a.count(), y.a.count());
    return shape;
  }
  const int64_t n = x.a.count();
  if (x.a.type == NpyType::kFloat32)
    return compareFlat(t.step, label, reinterpret_cast<const float*>(x.a.bytes.data()),
                       reinterpret_cast<const float*>(y.a.bytes.data()), n);
  if (x.a.type == NpyType::kFloat64)
    return compareFlat(t.step, label, reinterpret_cast<const double*>(x.a.bytes.data()),
                       reinterpret_cast<const double*>(y.a.bytes.data()), n);
  const auto a = asIntegers(x.a), b = asIntegers(y.a);
  return compareFlat(t.step, label, a.data(), b.data(), n);
}

// The rank whose FSDP2 row shard holds a gathered tensor's first differing element: rows (torch.chunk's split)
// of `rows.second` each.
int64_t shardOwner(const Difference& d, int64_t count, std::pair<int64_t, int64_t> rows) {
  const int64_t perRow = rows.first > 0 ? count / rows.first : 1;
  return d.firstIndex / std::max<int64_t>(1, perRow) / std::max<int64_t>(1, rows.second);
}

}  // namespace

std::optional<std::string> firstNonFinite(const RunDump& run) {
  for (const auto& t : run.tensors) {
    if (t.step < 0 || (t.kind != "loss" && t.kind != "grad" && t.kind != "param")) continue;
    const Loaded x = load(run, t);
    if (!x.present) continue;
    const std::string label = t.name == t.kind ? t.kind : t.kind + " " + t.name;  // "loss", "grad fc.weight"
    std::optional<std::string> why;
    if (x.a.type == NpyType::kFloat32)
      why = nonFinite(t.step, label, reinterpret_cast<const float*>(x.a.bytes.data()), x.a.count());
    else if (x.a.type == NpyType::kFloat64)
      why = nonFinite(t.step, label, reinterpret_cast<const double*>(x.a.bytes.data()), x.a.count());
    if (why) return why;
  }
  return std::nullopt;
}

DumpComparison compareDumps(const RunDump& plain, const RunDump& other) {
  std::map<std::tuple<int, std::string, std::string>, const DumpedTensor*> byKey;
  for (const auto& t : other.tensors) byKey[{t.step, t.kind, t.name}] = &t;
  std::map<std::string, const DumpedTensor*> initial;  // buffers before step 0
  for (const auto& t : plain.tensors)
    if (t.step < 0 && t.kind == "buffer") initial[t.name] = &t;
  DumpComparison c;
  for (const auto& t : plain.tensors) {
    if (t.step < 0) continue;
    if (c.firstStep && t.step > *c.firstStep) break;  // the first differing step is all the evidence needed
    const auto it = byKey.find({t.step, t.kind, t.name});
    DumpedTensor missing = t;
    missing.file = "";
    const DumpedTensor& u = it == byKey.end() ? missing : *it->second;
    const Loaded x = load(plain, t), y = load(other, u);
    auto d = compareOne(t, x, y);
    if (!d) continue;
    if (const auto sh = plain.shardRows.find(t.name);
        sh != plain.shardRows.end() && d->firstIndex >= 0 && (t.kind == "grad" || t.kind == "param"))
      d->tensor += " (rank " + std::to_string(shardOwner(*d, x.a.count(), sh->second)) + "'s shard)";
    if (t.kind != "mask") {
      c.differences.push_back(*d);
      if (!c.firstStep) {
        c.firstStep = t.step;
        c.evidence.clear();  // masks are each step's last entries: what is here came from earlier steps
      }
    }
    TensorEvidence e;
    e.name = t.name;
    e.kind = tensorKind(t.kind);
    e.plainPresent = x.present;
    e.otherPresent = y.present;
    e.maxUlp = d->maxUlpDistance;
    if (x.present) e.plain = asDoubles(x.a, t.file);
    if (y.present) e.other = asDoubles(y.a, u.file);
    e.floating = x.present && isFloating(x.a.type);
    e.digits = x.present && x.a.type == NpyType::kFloat64 ? 53 : 24;
    if (e.kind == TensorKind::kState) {
      // The value before this step: the previous step's plain buffer (equal in both runs, or that step would
      // be the first to differ), else the initial one.
      const DumpedTensor* prev = nullptr;
      for (const auto& p : plain.tensors)
        if (p.kind == "buffer" && p.name == t.name && p.step == t.step - 1) prev = &p;
      if (!prev && initial.count(t.name)) prev = initial[t.name];
      if (prev) {
        const Loaded b = load(plain, *prev);
        if (b.present) e.before = asDoubles(b.a, prev->file);
      }
      if (plain.momenta.count(t.name)) e.momentum = plain.momenta.at(t.name);
    }
    c.evidence.push_back(std::move(e));
  }
  // Differences of later steps are not listed: a first difference propagates to everything after it. Masks of
  // earlier steps that differed alone are no evidence for this step.
  if (!c.firstStep) c.evidence.clear();
  return c;
}

}  // namespace ckpt
