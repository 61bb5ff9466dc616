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
#include "harness/engine/policy_rule.h"
#include "harness/engine/resource_guard.h"
#include "harness/mutants/catalog.h"
#include "harness/random_search.h"
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
    roots.push_back(self.parent_path());  // an install: share/ckptcheck next to bin/ is not assumed
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
  std::vector<std::optional<Violation>> violations = std::vector<std::optional<Violation>>(properties().size());
  int64_t policyRuns = 0;
  uint32_t families = 0;  // familyBits of the runs that ran
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

// What is under test: an engine (the correct one or a mutant) on a device, and the optimal DP property 5 checks.
struct Subject {
  const EngineVariant& engine;
  Device device;
  OptimalPlanner planOptimal;
};

// The trial of a case, its unresolvable families included as failed runs (resolveFamilies).
Trial trialOf(const VerifyCase& c, const std::vector<std::string>& families, const Subject& engine) {
  Resolved r = resolveFamilies(c, families);
  Trial t = runTrial(c.spec, r.policies, engine.engine, engine.device);
  for (auto& u : r.unresolved) t.runs.push_back(std::move(u));
  t.optimalRival = c.draw.optimalRival;
  t.longLayers = c.draw.longLayers;
  t.longBudget = c.draw.longBudget;
  t.planOptimal = engine.planOptimal;
  return t;
}

Outcome evaluate(const VerifyCase& c, const std::vector<std::string>& families, const Subject& engine) {
  const Trial t = trialOf(c, families, engine);
  Outcome o;
  for (const auto& r : t.runs) {
    if (!r.ran) continue;
    ++o.policyRuns;
    o.families |= familyBit(policyFamily(parsePolicy(r.policy)));
  }
  for (const PropertyDef& p : properties())
    o.violations[static_cast<size_t>(propertyNumber(&p) - 1)] = checkProperty(&p, t);
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
  with([](CaseSpec& d) {
    for (BlockSpec& b : d.blocks) b.dropPath = 0;
  });
  with([](CaseSpec& d) { d.compute = Compute::kExact; });
  with([](CaseSpec& d) {
    for (BlockSpec& b : d.blocks)
      if (b.activation == Activation::kRrelu) b.activation = Activation::kRelu;
  });
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

// The middle of every range: what a catalogue case runs its policy families with.
constexpr PolicyDraw kCatalogueDraw{.uniformK = 500, .revolveSlots = 500, .optimalBudget = 500, .segmentsBudget = 500};

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
    // Digits only: stoull takes "-1" for 2^64 - 1.
    if (a == 0 || token.find_first_not_of("0123456789") < a) throw bad();
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

void addFamilies(VerifyReport& r, uint32_t bits) {
  const auto& all = runFamilies();
  for (size_t k = 0; k < all.size(); ++k)
    if (bits & (uint32_t{1} << k)) ++r.familyCases[all[k]];
}

void count(VerifyReport& r, const Outcome& o) {
  for (size_t k = 0; k < r.perProperty.size(); ++k) {
    ++r.perProperty[k].checked;
    if (o.violations[k]) ++r.perProperty[k].violated;
  }
  r.policyRuns += o.policyRuns;
  addFamilies(r, o.families);
}

// Refuses options that cannot run, before any case does (same order of checks as the flags are documented).
std::unique_ptr<EngineVariant> engineFor(const VerifyOptions& o) {
  std::unique_ptr<EngineVariant> engine = std::make_unique<EngineVariant>();
  if (!o.mutant.empty()) {
    const Mutant* m = findMutant(o.mutant);
    if (!m) throw InputError("unknown mutant '" + o.mutant + "' (known: " + mutantNames() + ")");
    engine = m->make();
  }
  requireDevice(o.device);
  for (const auto& f : o.policies) checkPolicyFamily(f);
  if (o.cases < 0) throw InputError("--cases must be >= 0");
  if (o.shardCount < 1 || o.shardIndex < 0 || o.shardIndex >= o.shardCount)
    throw InputError("--shard " + std::to_string(o.shardIndex) + "/" + std::to_string(o.shardCount) +
                     ": expected I/N with 0 <= I < N");
  return engine;
}

// The same failure: the same class of difference (harness/diagnose.h), or neither has one. Shrinking keeps it, so
// the shrunk case shows the bug the search found: a redrawn dropout mask (rng-desync) must not shrink to a case
// where the new mask happens to drop the one unit a ReLU let through, which reads as a missing gradient.
bool sameClass(const Violation& a, const Violation& b) {
  if (!a.diagnosis || !b.diagnosis) return !a.diagnosis && !b.diagnosis;
  return a.diagnosis->cls == b.diagnosis->cls;
}

// Shrinks a violating case (its RapidCheck tree, or a catalogue case's candidate tree) to the smallest that still
// violates the same property with the same class, and describes it.
Finding shrunkFinding(const rc::Shrinkable<VerifyCase>& tree, const Violation& v, const VerifyOptions& o,
                      const Subject& subject, std::string origin) {
  Violation last = v;
  const auto sh = search::shrinkGreedy(
      tree,
      [&](const VerifyCase& c) {
        auto w = violates(c, last.property, o.policies, subject);
        if (w && !sameClass(*w, v)) w.reset();
        if (w) last = *w;
        return w.has_value();
      },
      o.maxShrinkTrials);
  Finding f;
  f.violation = last;
  f.origin = std::move(origin);
  f.original = tree.value();
  f.shrunk = sh.value;
  f.policies = policiesFor(sh.value, o.policies);
  f.shrinkSteps = static_cast<int>(sh.path.size());
  f.shrinkTrials = sh.trials;
  f.reproduce = search::pathText(sh.path);  // the caller prefixes SEED:INDEX where there is one
  return f;
}

// --reproduce SEED:INDEX[:PATH]: exactly one case, the node of the shrink tree the path names.
void reproduce(const VerifyOptions& o, const Subject& subject, VerifyReport& r) {
  const Parsed p = parseReproduce(o.reproduce);
  const auto node = search::followPath(search::drawCase(genVerifyCase(o.limits), p.seed, p.index), p.path);
  if (!node) throw InputError("--reproduce '" + o.reproduce + "': the shrink path does not exist");
  const VerifyCase c = node->value();
  const Outcome out = evaluate(c, o.policies, subject);
  count(r, out);
  r.coverage.add(c.spec);
  r.randomCases = 1;
  if (!out.failed()) return;
  Finding f;
  f.violation = out.first();
  f.origin = "reproduced case " + o.reproduce;
  f.original = f.shrunk = c;
  f.policies = policiesFor(c, o.policies);
  f.reproduce = o.reproduce;
  r.finding = std::move(f);
}

// Runs work(i) for i = 0, 1, ... n-1 on `threads` threads, handing indices out in order; once stop(i) says true
// for some i, no index above it is handed out. The first exception is rethrown, prefixed with what(i).
template <class Work, class Stop, class What>
void forEachIndex(int64_t n, int threads, Work&& work, Stop&& stop, What&& what) {
  std::atomic<int64_t> next{0};
  std::atomic<int64_t> firstStop{std::numeric_limits<int64_t>::max()};
  std::mutex mutex;
  std::string error;
  auto worker = [&] {
    for (int64_t i = next++; i < n && i <= firstStop.load(); i = next++) {
      try {
        work(i);
      } catch (const std::exception& e) {
        std::lock_guard<std::mutex> lock(mutex);
        if (error.empty()) error = what(i) + ": " + e.what();
        firstStop = -1;
        return;
      }
      if (!stop(i)) continue;
      int64_t seen = firstStop.load();
      while (i < seen && !firstStop.compare_exchange_weak(seen, i)) {
      }
    }
  };
  std::vector<std::thread> pool;
  for (int64_t k = 1; k < std::min<int64_t>(threads, std::max<int64_t>(1, n)); ++k) pool.emplace_back(worker);
  worker();
  for (auto& t : pool) t.join();
  if (!error.empty()) throw std::runtime_error(error);
}

// The random search, in parallel: per case only a summary is kept (a million cases fit), the outcomes of failing
// cases whole. Counts every case up to the lowest failing index, and returns that index, if any.
std::optional<int64_t> searchRandom(const VerifyOptions& o, const Subject& subject, VerifyReport& r,
                                    std::map<int64_t, Outcome>& failures) {
  struct Summary {
    uint64_t coverage = 0;  // coverageBits of the case
    int32_t policyRuns = 0;
    uint32_t families = 0;  // familyBits of the runs that ran
    uint32_t violated = 0;  // bit k: property k + 1
  };
  if (r.perProperty.size() > 32) throw std::logic_error("Summary::violated holds 32 properties at most");
  auto inShard = [&](int64_t i) { return i % o.shardCount == o.shardIndex; };
  const auto gen = genVerifyCase(o.limits);
  std::vector<Summary> summaries(static_cast<size_t>(o.cases));
  std::mutex mutex;
  const auto searchStart = Clock::now();
  forEachIndex(
      o.cases, r.threads,
      [&](int64_t i) {
        if (!inShard(i)) return;
        const VerifyCase c = search::drawCase(gen, o.seed, i).value();
        Outcome out = evaluate(c, o.policies, subject);
        Summary& sum = summaries[static_cast<size_t>(i)];
        sum.coverage = coverageBits(c.spec);
        for (size_t k = 0; k < out.violations.size(); ++k) sum.violated |= out.violations[k] ? 1u << k : 0u;
        sum.policyRuns = static_cast<int32_t>(out.policyRuns);
        sum.families = out.families;
        if (!out.failed()) return;
        std::lock_guard<std::mutex> lock(mutex);
        failures.emplace(i, std::move(out));
      },
      [&](int64_t i) { return summaries[static_cast<size_t>(i)].violated != 0; },
      [&](int64_t i) { return "random case " + std::to_string(i) + " (seed " + std::to_string(o.seed) + ")"; });
  const std::optional<int64_t> fail = failures.empty() ? std::nullopt : std::optional<int64_t>(failures.begin()->first);
  const int64_t last = fail ? *fail + 1 : o.cases;
  for (int64_t i = 0; i < last; ++i) {
    if (!inShard(i)) continue;
    const Summary& sum = summaries[static_cast<size_t>(i)];
    for (size_t k = 0; k < r.perProperty.size(); ++k) {
      ++r.perProperty[k].checked;
      if (sum.violated & (1u << k)) ++r.perProperty[k].violated;
    }
    r.policyRuns += sum.policyRuns;
    addFamilies(r, sum.families);
    r.coverage.addBits(sum.coverage);
    ++r.randomCases;
  }
  r.searchSeconds = secondsSince(searchStart);
  r.casesPerMinute = r.searchSeconds > 0 ? 60.0 * static_cast<double>(r.randomCases) / r.searchSeconds : 0.0;
  return fail;
}

// Every catalogue case (in this shard) in parallel; the finding is the first failing one in name order.
void checkCatalogue(const VerifyOptions& o, const Subject& subject, const MemoryLimit& memory, VerifyReport& r) {
  const std::string dir = o.catalogueDir.empty() ? catalogueDirectory() : o.catalogueDir;
  if (dir.empty())
    throw std::runtime_error("cases/catalog not found: set CKPT_SOURCE_DIR to the ckptcheck source tree");
  std::vector<std::filesystem::path> all, files;
  for (const auto& e : std::filesystem::directory_iterator(dir))
    if (e.path().extension() == ".json") all.push_back(e.path());
  std::sort(all.begin(), all.end());
  for (size_t k = 0; k < all.size(); ++k)
    if (static_cast<int64_t>(k) % o.shardCount == o.shardIndex) files.push_back(all[k]);
  std::vector<VerifyCase> cases;
  for (const auto& file : files) {
    cases.push_back({loadCase(file.string()), kCatalogueDraw});
    guardCase(cases.back().spec, {}, memory);
  }
  std::vector<std::optional<Outcome>> outcomes(cases.size());
  forEachIndex(
      static_cast<int64_t>(cases.size()), r.threads,
      [&](int64_t k) {
        outcomes[static_cast<size_t>(k)] = evaluate(cases[static_cast<size_t>(k)], o.policies, subject);
      },
      [](int64_t) { return false; },
      [&](int64_t k) { return "catalogue case " + files[static_cast<size_t>(k)].stem().string(); });
  for (size_t k = 0; k < cases.size(); ++k) {
    const Outcome& out = *outcomes[k];
    count(r, out);
    r.coverage.add(cases[k].spec);
    ++r.catalogueCases;
    if (!out.failed()) continue;
    r.finding = shrunkFinding(search::candidateTree(cases[k], catalogueShrinks), out.first(), o, subject,
                              "catalogue case " + files[k].stem().string());
    r.finding->reproduce.clear();  // a catalogue case has no SEED:INDEX
    return;
  }
}

}  // namespace

VerifyReport runVerify(const VerifyOptions& o) {
  const auto t0 = Clock::now();
  const std::unique_ptr<EngineVariant> owned = engineFor(o);
  const Subject subject{o.engine ? *o.engine : *owned, o.device, o.optimalPlanner};
  const MemoryLimit memory = memoryLimit(o.maxActivationBytes);

  VerifyReport r;
  r.seed = o.seed;
  r.mutant = o.mutant;
  r.device = deviceName(o.device);
  r.threads = o.threads > 0 ? o.threads : std::max(1u, std::thread::hardware_concurrency());
  r.shardIndex = o.shardIndex;
  r.shardCount = o.shardCount;

  if (!o.reproduce.empty()) {
    reproduce(o, subject, r);
  } else if (std::map<int64_t, Outcome> failures; const auto fail = searchRandom(o, subject, r, failures)) {
    const auto tree = search::drawCase(genVerifyCase(o.limits), o.seed, *fail);
    const std::string at = std::to_string(o.seed) + ":" + std::to_string(*fail);
    r.finding = shrunkFinding(tree, failures.at(*fail).first(), o, subject,
                              "random case " + std::to_string(*fail) + " of seed " + std::to_string(o.seed));
    r.finding->reproduce = r.finding->reproduce.empty() ? at : at + ":" + r.finding->reproduce;
  } else if (o.catalogue) {
    checkCatalogue(o, subject, memory, r);
  }
  r.totalSeconds = secondsSince(t0);
  return r;
}

}  // namespace ckpt
