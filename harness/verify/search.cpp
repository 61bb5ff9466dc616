#include "harness/verify/search.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <limits>
#include <map>
#include <mutex>
#include <thread>

#include "cases/case_json.h"
#include "cases/input_error.h"
#include "harness/engine/policy.h"
#include "harness/engine/resource_guard.h"
#include "harness/mutants/catalog.h"
#include "harness/verify/policy_draw.h"

namespace ckpt {

GenLimits verifyLimits() {
  GenLimits l;
  l.shrinkChoices = true;
  return l;
}

rc::Gen<VerifyCase> genVerifyCase(const GenLimits& limits) {
  return rc::gen::map(rc::gen::pair(genCase(limits), genPolicyDraw()),
                      [](const std::pair<CaseSpec, PolicyDraw>& p) { return VerifyCase{p.first, p.second}; });
}

void showValue(const VerifyCase& c, std::ostream& os) {
  showValue(c.spec, os);
  os << " with policy draw ";
  showValue(c.draw, os);
}

namespace {

// The policy strings of a case, and a run with a schedule error for each family that cannot even be resolved on
// the chain (its parameter needs a DP or a plan that throws): property 3 reports it and the case shrinks.
struct Resolved {
  std::vector<std::string> policies;
  std::vector<PolicyRun> unresolved;
};
Resolved resolveFamilies(const VerifyCase& c, const std::vector<std::string>& families) {
  const ChainCost cost = caseChainCost(c.spec);
  Resolved out;
  for (const auto& f : families.empty() ? defaultPolicyFamilies() : families) {
    try {
      std::string p = resolvePolicy(f, c.draw, cost);
      if (std::find(out.policies.begin(), out.policies.end(), p) == out.policies.end())
        out.policies.push_back(std::move(p));
    } catch (const std::exception& e) {
      PolicyRun r;
      r.policy = f;
      r.scheduleError = "cannot choose the policy's parameters on this chain: " + std::string(e.what());
      out.unresolved.push_back(std::move(r));
    }
  }
  return out;
}

}  // namespace

std::vector<std::string> policiesFor(const VerifyCase& c, const std::vector<std::string>& families) {
  Resolved r = resolveFamilies(c, families);
  for (const auto& u : r.unresolved) r.policies.push_back(u.policy + " (unresolved)");
  return r.policies;
}

std::string catalogueDirectory() {
  namespace fs = std::filesystem;
  std::vector<fs::path> roots;
  if (const char* env = std::getenv("CKPT_SOURCE_DIR")) roots.emplace_back(env);
#ifdef CKPT_SOURCE_DIR_DEFAULT
  roots.emplace_back(CKPT_SOURCE_DIR_DEFAULT);
#endif
  std::error_code ec;
  const fs::path self = fs::read_symlink("/proc/self/exe", ec);
  if (!ec) {
    roots.push_back(self.parent_path());         // an install: share/ckptcheck next to bin/ is not assumed
    roots.push_back(self.parent_path().parent_path());
    roots.push_back(self.parent_path().parent_path().parent_path());  // build/bin -> source tree
  }
  for (const auto& r : roots)
    if (fs::is_directory(r / "cases" / "catalog", ec)) return (r / "cases" / "catalog").string();
  return {};
}

namespace {

using Clock = std::chrono::steady_clock;
double secondsSince(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }

// What one case gave: the first violation of each property, and how many policies ran.
struct Outcome {
  std::array<std::optional<Violation>, kPropertyCount> violations;
  int64_t policyRuns = 0;
  bool failed() const {
    for (const auto& v : violations)
      if (v) return true;
    return false;
  }
  // The lowest-numbered property violated.
  const Violation& first() const {
    for (const auto& v : violations)
      if (v) return *v;
    throw std::logic_error("no violation");
  }
};

// What is under test: an engine (the correct one or a mutant) on a device.
struct Subject {
  const EngineVariant& engine;
  Device device;
};

// The trial of a case, its unresolvable families included as failed runs (resolveFamilies).
Trial trialOf(const VerifyCase& c, const std::vector<std::string>& families, const Subject& engine) {
  Resolved r = resolveFamilies(c, families);
  Trial t = runTrial(c.spec, r.policies, engine.engine, engine.device);
  for (auto& u : r.unresolved) t.runs.push_back(std::move(u));
  t.optimalRival = c.draw.optimalRival;
  t.longLayers = c.draw.longLayers;
  t.longBudget = c.draw.longBudget;
  t.engine = &engine.engine;  // outlives the trial: the subject of the whole search
  return t;
}

Outcome evaluate(const VerifyCase& c, const std::vector<std::string>& families, const Subject& engine) {
  const Trial t = trialOf(c, families, engine);
  Outcome o;
  for (const auto& r : t.runs) o.policyRuns += r.ran ? 1 : 0;
  for (Property p : kProperties) o.violations[static_cast<size_t>(propertyNumber(p) - 1)] = checkProperty(p, t);
  return o;
}

std::optional<Violation> violates(const VerifyCase& c, Property p, const std::vector<std::string>& families,
                                  const Subject& engine) {
  try {
    return checkProperty(p, trialOf(c, families, engine));
  } catch (const InputError&) {
    return std::nullopt;  // a shrink the harness cannot run is not a counterexample
  }
}

rc::Random randomFor(uint64_t seed, int64_t index) {
  return rc::Random(rc::Random::Key{seed, static_cast<uint64_t>(index), 0x636b7074636865ULL, 0x766572696679ULL});
}
int sizeFor(int64_t index) { return static_cast<int>(index % 100); }

// Walks the shrink tree: the first child that still violates `p` is taken, until none does.
struct Shrunk {
  VerifyCase value;
  Violation violation;
  std::vector<int> path;
  int trials = 0;
};
Shrunk shrink(rc::Shrinkable<VerifyCase> current, Violation v, const std::vector<std::string>& families,
              const Subject& engine, int maxTrials) {
  Shrunk s{current.value(), std::move(v), {}, 0};
  bool progressed = true;
  while (progressed && s.trials < maxTrials) {
    progressed = false;
    auto children = current.shrinks();
    int index = 0;
    while (auto child = children.next()) {
      if (s.trials++ >= maxTrials) break;
      const VerifyCase candidate = child->value();
      if (auto w = violates(candidate, s.violation.property, families, engine)) {
        current = *child;
        s.value = candidate;
        s.violation = *w;
        s.path.push_back(index);
        progressed = true;
        break;
      }
      ++index;
    }
  }
  return s;
}

std::string pathText(const std::vector<int>& path) {
  std::string t;
  for (size_t i = 0; i < path.size(); ++i) t += (i ? "." : "") + std::to_string(path[i]);
  return t;
}

// Candidate smaller versions of a catalogue case (which has no RapidCheck shrink tree): halves and single blocks
// removed, one step, dropout off, the smallest batch, sequence and width. Invalid candidates are skipped.
std::vector<VerifyCase> catalogueShrinks(const VerifyCase& c) {
  std::vector<CaseSpec> out;
  const CaseSpec& s = c.spec;
  const size_t n = s.blocks.size();
  if (n > 1) {
    CaseSpec a = s, b = s;
    a.blocks.erase(a.blocks.begin() + static_cast<std::ptrdiff_t>(n / 2), a.blocks.end());
    b.blocks.erase(b.blocks.begin(), b.blocks.begin() + static_cast<std::ptrdiff_t>(n / 2));
    out.push_back(a);
    out.push_back(b);
    for (size_t k = 0; k < n && n <= 16; ++k) {
      CaseSpec d = s;
      d.blocks.erase(d.blocks.begin() + static_cast<std::ptrdiff_t>(k));
      out.push_back(d);
    }
  }
  auto with = [&](auto&& f) {
    CaseSpec d = s;
    f(d);
    if (!(d == s)) out.push_back(d);
  };
  with([](CaseSpec& d) { d.steps = 1; });
  with([](CaseSpec& d) { d.dropout = 0; });
  with([](CaseSpec& d) { d.batch = std::max<int64_t>(2, d.batch / 2); });
  with([](CaseSpec& d) { d.seq = std::max<int64_t>(1, d.seq / 2); });
  with([](CaseSpec& d) { d.width = std::max<int64_t>(2, d.width / 2); });
  std::vector<VerifyCase> valid;
  for (auto& d : out) {
    try {
      valid.push_back({parseCase(caseToJson(d)), c.draw});
    } catch (const InputError&) {
    }
  }
  return valid;
}

rc::Shrinkable<VerifyCase> catalogueShrinkable(const VerifyCase& c) {
  return rc::shrinkable::shrinkRecur(c, [](const VerifyCase& v) { return rc::seq::fromContainer(catalogueShrinks(v)); });
}

// The middle of every range: what a catalogue case runs its policy families with.
constexpr PolicyDraw kCatalogueDraw{500, 500, 500, 0, 0, 0};

struct Parsed {
  uint64_t seed;
  int64_t index;
  std::vector<int> path;
};
Parsed parseReproduce(const std::string& token) {
  auto bad = [&] { return InputError("--reproduce '" + token + "': expected SEED:INDEX[:PATH], e.g. 1:17:0.3.1"); };
  Parsed p{};
  const size_t a = token.find(':');
  if (a == std::string::npos) throw bad();
  const size_t b = token.find(':', a + 1);
  try {
    size_t used = 0;
    p.seed = std::stoull(token.substr(0, a), &used);
    if (used != a) throw bad();
    const std::string idx = token.substr(a + 1, b == std::string::npos ? std::string::npos : b - a - 1);
    p.index = std::stoll(idx, &used);
    if (used != idx.size() || p.index < 0) throw bad();
    if (b != std::string::npos && b + 1 < token.size()) {
      std::string rest = token.substr(b + 1);
      size_t from = 0;
      while (from <= rest.size()) {
        const size_t dot = std::min(rest.find('.', from), rest.size());
        const std::string part = rest.substr(from, dot - from);
        p.path.push_back(std::stoi(part, &used));
        if (used != part.size() || p.path.back() < 0) throw bad();
        from = dot + 1;
      }
    }
  } catch (const std::logic_error&) {
    throw bad();
  }
  return p;
}

void count(VerifyReport& r, const Outcome& o) {
  for (size_t k = 0; k < kPropertyCount; ++k) {
    ++r.perProperty[k].checked;
    if (o.violations[k]) ++r.perProperty[k].violated;
  }
  r.policyRuns += o.policyRuns;
}

}  // namespace

VerifyReport runVerify(const VerifyOptions& o) {
  const auto t0 = Clock::now();
  std::unique_ptr<EngineVariant> engine = std::make_unique<EngineVariant>();
  if (!o.mutant.empty()) {
    const Mutant* m = findMutant(o.mutant);
    if (!m) throw InputError("unknown mutant '" + o.mutant + "' (known: " + mutantNames() + ")");
    engine = m->make();
  }
  requireDevice(o.device);
  const Subject subject{o.engine ? *o.engine : *engine, o.device};
  for (const auto& f : o.policies) checkPolicyFamily(f);
  if (o.cases < 0) throw InputError("--cases must be >= 0");
  if (o.shardCount < 1 || o.shardIndex < 0 || o.shardIndex >= o.shardCount)
    throw InputError("--shard " + std::to_string(o.shardIndex) + "/" + std::to_string(o.shardCount) +
                     ": expected I/N with 0 <= I < N");
  const MemoryLimit memory = memoryLimit(o.maxActivationBytes);
  auto inShard = [&](int64_t i) { return i % o.shardCount == o.shardIndex; };
  const auto gen = genVerifyCase(o.limits);

  VerifyReport r;
  r.seed = o.seed;
  r.mutant = o.mutant;
  r.device = deviceName(o.device);
  r.threads = o.threads > 0 ? o.threads : std::max(1u, std::thread::hardware_concurrency());
  r.shardIndex = o.shardIndex;
  r.shardCount = o.shardCount;

  if (!o.reproduce.empty()) {
    const Parsed p = parseReproduce(o.reproduce);
    rc::Shrinkable<VerifyCase> s = gen(randomFor(p.seed, p.index), sizeFor(p.index));
    for (int k : p.path) {
      auto children = s.shrinks();
      std::optional<rc::Shrinkable<VerifyCase>> pick;
      for (int i = 0; i <= k; ++i) {
        auto child = children.next();
        if (!child) throw InputError("--reproduce '" + o.reproduce + "': the shrink path does not exist");
        if (i == k) pick = *child;
      }
      s = *pick;
    }
    const VerifyCase c = s.value();
    const Outcome out = evaluate(c, o.policies, subject);
    count(r, out);
    r.coverage.add(c.spec);
    r.randomCases = 1;
    if (out.failed()) {
      Finding f;
      f.violation = out.first();
      f.origin = "reproduced case " + o.reproduce;
      f.original = f.shrunk = c;
      f.policies = policiesFor(c, o.policies);
      f.reproduce = o.reproduce;
      r.finding = std::move(f);
    }
    r.totalSeconds = secondsSince(t0);
    return r;
  }

  // Random cases, in parallel; the outcome is that of the lowest failing index. Per case only a summary is
  // kept (a million cases fit); the outcomes of failing cases are kept whole.
  struct Summary {
    uint8_t violated = 0;  // bit k: property k + 1
    int32_t policyRuns = 0;
    uint64_t coverage = 0;  // coverageBits of the case
  };
  std::vector<Summary> summaries(static_cast<size_t>(o.cases));
  std::map<int64_t, Outcome> failures;
  std::atomic<int64_t> next{0};
  std::atomic<int64_t> firstFail{std::numeric_limits<int64_t>::max()};
  std::mutex errorMutex;
  std::string error;
  const auto searchStart = Clock::now();
  auto worker = [&] {
    for (;;) {
      const int64_t i = next++;
      if (i >= o.cases || i > firstFail.load()) return;
      if (!inShard(i)) continue;
      try {
        const VerifyCase c = gen(randomFor(o.seed, i), sizeFor(i)).value();
        Outcome out = evaluate(c, o.policies, subject);
        Summary& sum = summaries[static_cast<size_t>(i)];
        sum.coverage = coverageBits(c.spec);
        for (size_t k = 0; k < kPropertyCount; ++k) sum.violated |= static_cast<uint8_t>(out.violations[k] ? 1u << k : 0u);
        sum.policyRuns = static_cast<int32_t>(out.policyRuns);
        if (out.failed()) {
          {
            std::lock_guard<std::mutex> lock(errorMutex);
            failures.emplace(i, std::move(out));
          }
          int64_t seen = firstFail.load();
          while (i < seen && !firstFail.compare_exchange_weak(seen, i)) {
          }
        }
      } catch (const std::exception& e) {
        std::lock_guard<std::mutex> lock(errorMutex);
        if (error.empty()) error = "random case " + std::to_string(i) + " (seed " + std::to_string(o.seed) + "): " + e.what();
        firstFail = -1;
        return;
      }
    }
  };
  std::vector<std::thread> pool;
  const int threads = std::min<int64_t>(r.threads, std::max(1, o.cases));
  for (int k = 1; k < threads; ++k) pool.emplace_back(worker);
  worker();
  for (auto& t : pool) t.join();
  if (!error.empty()) throw std::runtime_error(error);
  const int64_t fail = firstFail.load();
  const int64_t last = fail == std::numeric_limits<int64_t>::max() ? o.cases : fail + 1;
  for (int64_t i = 0; i < last; ++i) {
    if (!inShard(i)) continue;
    const Summary& sum = summaries[static_cast<size_t>(i)];
    for (size_t k = 0; k < kPropertyCount; ++k) {
      ++r.perProperty[k].checked;
      if (sum.violated & (1u << k)) ++r.perProperty[k].violated;
    }
    r.policyRuns += sum.policyRuns;
    r.coverage.addBits(sum.coverage);
  }
  r.randomCases = 0;
  for (int64_t i = 0; i < last; ++i) r.randomCases += inShard(i) ? 1 : 0;
  r.searchSeconds = secondsSince(searchStart);
  r.casesPerMinute = r.searchSeconds > 0 ? 60.0 * static_cast<double>(r.randomCases) / r.searchSeconds : 0.0;

  if (fail != std::numeric_limits<int64_t>::max()) {
    const Outcome& out = failures.at(fail);
    const rc::Shrinkable<VerifyCase> s = gen(randomFor(o.seed, fail), sizeFor(fail));
    Shrunk sh = shrink(s, out.first(), o.policies, subject, o.maxShrinkTrials);
    Finding f;
    f.violation = sh.violation;
    f.origin = "random case " + std::to_string(fail) + " of seed " + std::to_string(o.seed);
    f.original = s.value();
    f.shrunk = sh.value;
    f.policies = policiesFor(sh.value, o.policies);
    f.shrinkSteps = static_cast<int>(sh.path.size());
    f.shrinkTrials = sh.trials;
    f.reproduce = std::to_string(o.seed) + ":" + std::to_string(fail) + (sh.path.empty() ? "" : ":" + pathText(sh.path));
    r.finding = std::move(f);
    r.totalSeconds = secondsSince(t0);
    return r;
  }

  if (o.catalogue) {
    const std::string dir = o.catalogueDir.empty() ? catalogueDirectory() : o.catalogueDir;
    if (dir.empty()) throw std::runtime_error("cases/catalog not found: set CKPT_SOURCE_DIR to the ckptcheck source tree");
    std::vector<std::filesystem::path> files;
    for (const auto& e : std::filesystem::directory_iterator(dir))
      if (e.path().extension() == ".json") files.push_back(e.path());
    std::sort(files.begin(), files.end());
    std::vector<std::filesystem::path> shard;
    for (size_t k = 0; k < files.size(); ++k)
      if (inShard(static_cast<int64_t>(k))) shard.push_back(files[k]);
    files = std::move(shard);
    // Every catalogue case in parallel; the finding is the first failing one in name order.
    std::vector<VerifyCase> cases;
    for (const auto& file : files) {
      cases.push_back({loadCase(file.string()), kCatalogueDraw});
      guardCase(cases.back().spec, {}, memory);
    }
    std::vector<std::optional<Outcome>> outcomes(cases.size());
    std::atomic<size_t> nextCase{0};
    auto catalogueWorker = [&] {
      for (size_t k = nextCase++; k < cases.size(); k = nextCase++) {
        try {
          outcomes[k] = evaluate(cases[k], o.policies, subject);
        } catch (const std::exception& e) {
          std::lock_guard<std::mutex> lock(errorMutex);
          if (error.empty()) error = "catalogue case " + files[k].stem().string() + ": " + e.what();
        }
      }
    };
    std::vector<std::thread> catalogueThreads;
    for (int k = 1; k < std::min<int>(r.threads, static_cast<int>(cases.size())); ++k)
      catalogueThreads.emplace_back(catalogueWorker);
    catalogueWorker();
    for (auto& t : catalogueThreads) t.join();
    if (!error.empty()) throw std::runtime_error(error);
    for (size_t k = 0; k < cases.size(); ++k) {
      const auto& file = files[k];
      const VerifyCase& c = cases[k];
      const Outcome& out = *outcomes[k];
      count(r, out);
      r.coverage.add(c.spec);
      ++r.catalogueCases;
      if (out.failed()) {
        Shrunk sh = shrink(catalogueShrinkable(c), out.first(), o.policies, subject, o.maxShrinkTrials);
        Finding f;
        f.violation = sh.violation;
        f.origin = "catalogue case " + file.stem().string();
        f.original = c;
        f.shrunk = sh.value;
        f.policies = policiesFor(sh.value, o.policies);
        f.shrinkSteps = static_cast<int>(sh.path.size());
        f.shrinkTrials = sh.trials;
        r.finding = std::move(f);
        break;
      }
    }
  }
  r.totalSeconds = secondsSince(t0);
  return r;
}

}  // namespace ckpt
