#include "harness/adapters/validate.h"

#include <rapidcheck.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <limits>
#include <random>
#include <sstream>

#include "cases/case_json.h"
#include "cases/generators.h"
#include "harness/adapters/adapter.h"
#include "harness/adapters/case_dir.h"
#include "harness/adapters/tolerance.h"
#include "harness/compare.h"
#include "harness/dtype_dispatch.h"
#include "harness/engine/executor.h"
#include "harness/engine/policy.h"
#include "harness/exit_codes.h"
#include "reference/trainer.h"

namespace ckpt {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

enum class Verdict { kHolds, kFinding, kFault };

// Check names, as reports and JUnit print them.
constexpr const char* kBitwise = "bitwise";             // check 1
constexpr const char* kReference = "reference";         // check 2
constexpr const char* kForwardCalls = "forward-calls";  // check 3
constexpr const char* kSavedBytes = "saved-bytes";      // check 3
constexpr const char* kAdapter = "adapter";             // the adapter failed to run or broke the protocol

struct CaseOutcome {
  Verdict verdict = Verdict::kHolds;
  std::string check;    // which check failed
  std::string message;  // one paragraph for people
  std::optional<Difference> first;
  // What a further shrink must keep: for check 1, whether values (loss, gradients) or only state differ, so a
  // dropout finding is not simplified into "only the generator's state differs".
  std::string signature() const {
    if (!first) return check;
    return check + (first->tensor.rfind("state", 0) == 0 ? ":state" : ":values");
  }
  json differences = json::array();
};
constexpr const char* kStateOnly = "bitwise:state";  // CaseOutcome::signature of check 1 when only state differs

// The worst check-2 error seen, per dtype.
struct ReferenceStats {
  double worst[2] = {0, 0};  // float, double: error / tolerance
  std::string where[2];
  int cases[2] = {0, 0};
};

// A bad request (InputError) inside a property must end the run with exit 2, not be shrunk as a finding.
struct Session {
  const ValidateOptions& opt;
  AdapterClient& client;
  const Capabilities& caps;
  fs::path work;
  ReferenceStats ref;
  int evaluations = 0;
  std::optional<std::string> fatalInput;
  std::ostream& err;
};

std::string fmt(double v) {
  std::ostringstream s;
  s.precision(3);
  s << v;
  return s.str();
}

template <class T>
double maxAbs(const Mat<T>& m) {
  double x = 0;
  for (int64_t i = 0; i < m.size(); ++i) x = std::max(x, std::abs(static_cast<double>(m.data()[i])));
  return x;
}

// max |got - ref| over a tensor; infinity for a shape mismatch or a NaN on one side only.
template <class T>
double maxAbsDiff(const Mat<T>& ref, const Mat<T>& got) {
  if (ref.rows() != got.rows() || ref.cols() != got.cols()) return std::numeric_limits<double>::infinity();
  double d = 0;
  for (int64_t i = 0; i < ref.size(); ++i) {
    const double a = static_cast<double>(ref.data()[i]), b = static_cast<double>(got.data()[i]);
    if (std::isnan(a) != std::isnan(b)) return std::numeric_limits<double>::infinity();
    if (!std::isnan(a)) d = std::max(d, std::abs(a - b));
  }
  return d;
}

struct RefError {
  double error = 0;  // relative, worst tensor (tolerance.h)
  std::string tensor;
  int step = 0;
};

// Check 2's comparison, tensor by tensor as tolerance.h defines it: the error relative to the tensor's own
// magnitude, or to kReferenceFloor of the largest tensor of its kind in that step (gradients with the input
// gradient; state) when the tensor itself is near zero.
template <class T>
RefError compareWithReference(const std::vector<StepResult<T>>& ref, const std::vector<StepResult<T>>& got) {
  RefError e;
  auto see = [&](double diff, double own, double scale, const std::string& name, int step) {
    const double err = diff / std::max({own, kReferenceFloor * scale, std::numeric_limits<double>::min()});
    if (err > e.error || (std::isnan(err) && !std::isnan(e.error))) e = {err, name, step};
  };
  for (size_t s = 0; s < ref.size() && s < got.size(); ++s) {
    const auto& r = ref[s];
    const auto& g = got[s];
    const int step = static_cast<int>(s);
    const double rl = static_cast<double>(r.loss), gl = static_cast<double>(g.loss);
    see(std::isnan(rl) != std::isnan(gl) ? std::numeric_limits<double>::infinity() : std::abs(rl - gl), std::abs(rl),
        std::abs(rl), "loss", step);
    double gradScale = maxAbs(r.inputGrad), stateScale = 0;
    for (const auto& t : r.grads) gradScale = std::max(gradScale, maxAbs(t.value));
    for (const auto& t : r.state) stateScale = std::max(stateScale, maxAbs(t.value));
    for (size_t k = 0; k < r.grads.size(); ++k)
      see(maxAbsDiff(r.grads[k].value, g.grads[k].value), maxAbs(r.grads[k].value), gradScale,
          "grad " + r.grads[k].name, step);
    see(maxAbsDiff(r.inputGrad, g.inputGrad), maxAbs(r.inputGrad), gradScale, "input_grad", step);
    // The adapter's state holds the reference's buffers in order, then possibly its generator (not comparable).
    for (size_t k = 0; k < r.state.size(); ++k)
      see(maxAbsDiff(r.state[k].value, g.state[k].value), maxAbs(r.state[k].value), stateScale,
          "state " + r.state[k].name, step);
  }
  return e;
}

// Check 2 on `off` (the case with dropout off, in the dtype check 2 runs in): one plain adapter run against the
// reference trainer. `reuse` is the plain run of the case itself when that already is `off`.
template <class U>
RefError referenceCheck(Session& s, const CaseSpec& off, const fs::path& dir, const std::vector<StepResult<U>>* reuse) {
  Chain<U> chain = buildChain<U>(off);
  const CaseLayout layout = caseLayout(chain);
  std::vector<StepResult<U>> got;
  if (reuse) {
    got = *reuse;
  } else {
    const std::string caseDir = (dir / "case-reference").string();
    writeCaseDir(caseDir, chain);
    s.client.run(caseDir, (dir / "plain-reference").string(), "plain", off.steps, static_cast<int>(off.blocks.size()));
    got = readRunResults<U>((dir / "plain-reference").string(), layout, off.steps);
  }
  const auto ref = trainReference(chain, off.steps);  // the chain is still at its initial values
  return compareWithReference(ref, got);
}

std::string blockSummary(const CaseSpec& c) {
  std::ostringstream s;
  s << c.blocks.size() << " block(s): ";
  for (size_t i = 0; i < c.blocks.size(); ++i) {
    s << (i ? ", " : "") << blockKindName(c.blocks[i].kind);
    if (c.blocks[i].kind == BlockKind::kMlp) s << "(" << activationName(c.blocks[i].activation) << ")";
  }
  s << "; batch " << c.batch << ", seq " << c.seq << ", width " << c.width << ", " << dtypeName(c.dtype) << ", "
    << rngModelName(c.rng) << " rng, dropout " << c.dropout << ", " << c.steps << " step(s), " << lossKindName(c.loss);
  return s.str();
}

template <class T>
CaseOutcome evaluateTyped(Session& s, const CaseSpec& spec, const fs::path& dir) {
  CaseOutcome o;
  const int steps = spec.steps, L = static_cast<int>(spec.blocks.size());
  Chain<T> chain = buildChain<T>(spec);
  const CaseLayout layout = caseLayout(chain);
  const std::string caseDir = (dir / "case").string();
  writeCaseDir(caseDir, chain);
  RunMeta pm, cm;
  std::vector<StepResult<T>> plain, ck;
  try {
    pm = s.client.run(caseDir, (dir / "plain").string(), "plain", steps, L);
    plain = readRunResults<T>((dir / "plain").string(), layout, steps);
    cm = s.client.run(caseDir, (dir / "checkpoint").string(), "checkpoint", steps, L);
    ck = readRunResults<T>((dir / "checkpoint").string(), layout, steps);

    // Check 2: the translation is faithful. Dropout off, as two generators' masks cannot agree; in double when
    // the adapter runs double, since float rounding amplified by an ill-conditioned case (BatchNorm over two
    // nearly equal rows) would hide a wrong translation behind a loose tolerance.
    CaseSpec off = spec;
    off.dropout = 0;
    const bool inDouble = s.caps.dtypes.count("double") > 0;
    if (inDouble) off.dtype = DType::kDouble;
    const bool same = off == spec;
    RefError e;
    double tol;
    if (inDouble) {
      const std::vector<StepResult<double>>* reuse = nullptr;
      if constexpr (std::is_same_v<T, double>) reuse = same ? &plain : nullptr;
      e = referenceCheck<double>(s, off, dir, reuse);
      tol = kReferenceTolDouble;
    } else {
      e = referenceCheck<T>(s, off, dir, same ? &plain : nullptr);
      tol = referenceTolerance<T>();
    }
    const int di = inDouble || sizeof(T) == 8 ? 1 : 0;
    const double ratio = e.error / tol;
    ++s.ref.cases[di];
    if (ratio > s.ref.worst[di] || std::isnan(ratio)) {
      s.ref.worst[di] = ratio;
      s.ref.where[di] = "step " + std::to_string(e.step) + " " + e.tensor + " (relative error " + fmt(e.error) + ")";
    }
    if (!(e.error <= tol)) {
      o.verdict = Verdict::kFault;
      o.check = kReference;
      o.message = std::string("the adapter's plain run (dropout off, ") + dtypeName(off.dtype) +
                  ") is not the case's model: step " + std::to_string(e.step) + " " + e.tensor +
                  " is off by relative error " + fmt(e.error) + " from ckptcheck's reference (tolerance " + fmt(tol) +
                  ")";
      return o;
    }
  } catch (const AdapterError& e) {
    o.verdict = Verdict::kFault;
    o.check = kAdapter;
    o.message = e.what();
    return o;
  }

  // Check 1: bitwise equal.
  const Comparison c = compareSteps(plain, ck);
  if (!c.bitwiseEqual) {
    o.verdict = Verdict::kFinding;
    o.check = kBitwise;
    o.first = c.differences.front();
    o.differences = toJson(c)["differences"];
    o.message = "checkpointed run differs from the plain run: " + toText(c.differences.front()) + " (" +
                std::to_string(c.differences.size()) + " tensor(s) differ)";
    return o;
  }

  // Check 3: what the adapter reports about its own run.
  if (pm.forwardCalls && cm.forwardCalls) {
    for (int st = 0; st < steps; ++st)
      for (int i = 0; i < L; ++i) {
        const int64_t p = (*pm.forwardCalls)[st][i], k = (*cm.forwardCalls)[st][i];
        int64_t expect = -1;
        if (cm.recomputedBlocks) {
          const auto& r = *cm.recomputedBlocks;
          expect = 1 + (std::find(r.begin(), r.end(), i) != r.end() ? 1 : 0);
        }
        if (p != 1 || (expect >= 0 && k != expect) || (expect < 0 && k < 1)) {
          o.verdict = Verdict::kFinding;
          o.check = kForwardCalls;
          o.message = "step " + std::to_string(st) + " block " + std::to_string(i) + ": " + std::to_string(p) +
                      " forward call(s) in the plain run (expected 1) and " + std::to_string(k) +
                      " in the checkpointed run (expected " + (expect >= 0 ? std::to_string(expect) : ">= 1") + ")";
          return o;
        }
      }
  }
  if (pm.savedBytes && cm.savedBytes) {
    for (int st = 0; st < steps; ++st)
      if ((*cm.savedBytes)[st] > (*pm.savedBytes)[st]) {
        o.verdict = Verdict::kFinding;
        o.check = kSavedBytes;
        o.message = "step " + std::to_string(st) + ": the checkpointed run saved " +
                    std::to_string((*cm.savedBytes)[st]) + " activation bytes, more than the plain run's " +
                    std::to_string((*pm.savedBytes)[st]);
        return o;
      }
  }
  return o;
}

CaseOutcome evaluate(Session& s, const CaseSpec& spec, const fs::path& dir) {
  ++s.evaluations;
  if (s.opt.verbose) s.err << "validate: case " << s.evaluations << ": " << caseToJson(spec).dump() << "\n";
  CaseOutcome o = withScalar(spec.dtype, [&](auto t) { return evaluateTyped<decltype(t)>(s, spec, dir); });
  if (s.opt.verbose && o.verdict != Verdict::kHolds) s.err << "validate:   -> " << o.check << ": " << o.message << "\n";
  return o;
}

// A small case with every block kind the adapter runs, for a first run that catches a broken adapter or a bad
// option before any random case (whose failure would otherwise be shrunk as if it were a finding).
CaseSpec smokeCase(const GenLimits& lim) {
  CaseSpec c;
  c.name = "smoke";
  c.batch = 2;
  c.seq = 4;
  c.width = 8;
  if (lim.mlp) c.blocks.push_back({BlockKind::kMlp, Activation::kGelu, 1});
  if (lim.residualBn) c.blocks.push_back({BlockKind::kResidualBn, Activation::kGelu, 1});
  if (lim.transformer) c.blocks.push_back({BlockKind::kTransformer, Activation::kGelu, 2});
  c.dtype = lim.doubleType ? DType::kDouble : DType::kFloat;
  c.rng = lim.statefulRng ? RngModel::kStateful : RngModel::kCounter;
  c.dropout = lim.dropout ? 0.1 : 0.0;
  c.steps = 2;
  c.seed = 3;
  c.lr = 0.05;
  return c;
}

// RapidCheck's default listener prints reproduce hints at exit; the report says everything instead.
class SilentListener : public rc::detail::TestListener {
 public:
  void onTestCaseFinished(const rc::detail::CaseDescription&) override {}
  void onShrinkTried(const rc::detail::CaseDescription&, bool) override {}
  void onTestFinished(const rc::detail::TestMetadata&, const rc::detail::TestResult&) override {}
};

// Simpler variants of a failing case, in the directions cases/generators.h orders its choices (first element
// simplest). The RapidCheck this builds with does not shrink gen::elementOf / gen::element choices (block kind,
// activation, heads, dropout, loss, dtype, generator model), so a shrunk counterexample can still carry, say, a
// transformer block where an mlp block fails the same way; this pass tries those simplifications one at a time.
std::vector<CaseSpec> simplerCases(const CaseSpec& c, const GenLimits& lim) {
  std::vector<CaseSpec> out;
  auto with = [&](auto&& change) {
    CaseSpec d = c;
    change(d);
    if (!(d == c)) out.push_back(d);
  };
  with([](CaseSpec& d) { d.dropout = 0; });
  for (size_t i = 0; i < c.blocks.size(); ++i) {
    with([&](CaseSpec& d) { d.blocks.erase(d.blocks.begin() + static_cast<std::ptrdiff_t>(i)); });
    // Another kind becomes an mlp block: relu first (simplest), but relu zeroes half its outputs, which can hide
    // what a finding is about (a dropout mask), so tanh and gelu are tried too.
    if (lim.mlp && c.blocks[i].kind != BlockKind::kMlp)
      for (Activation a : {Activation::kRelu, Activation::kTanh, Activation::kGelu})
        with([&](CaseSpec& d) { d.blocks[i] = {BlockKind::kMlp, a, 1}; });
    if (c.blocks[i].kind == BlockKind::kMlp) with([&](CaseSpec& d) { d.blocks[i].activation = Activation::kRelu; });
    if (c.blocks[i].kind == BlockKind::kTransformer) with([&](CaseSpec& d) { d.blocks[i].heads = 1; });
  }
  with([](CaseSpec& d) { d.steps = 1; });
  with([](CaseSpec& d) { d.seq = 1; });
  with([](CaseSpec& d) { d.batch = 2; });
  with([](CaseSpec& d) { d.width = 2; });
  with([](CaseSpec& d) { d.loss = LossKind::kCrossEntropy; });
  if (lim.statefulRng) with([](CaseSpec& d) { d.rng = RngModel::kStateful; });
  if (lim.doubleType) with([](CaseSpec& d) { d.dtype = DType::kDouble; });
  with([](CaseSpec& d) { d.seed = 0; });
  std::erase_if(out, [](const CaseSpec& d) { return d.blocks.empty(); });
  return out;
}

// Greedy: accept the first simpler case that fails the same way (CaseOutcome::signature), until none does.
CaseSpec shrinkFurther(Session& s, CaseSpec c, const std::string& signature, const GenLimits& lim,
                       const fs::path& scratch) {
  for (bool changed = true; changed;) {
    changed = false;
    for (const CaseSpec& d : simplerCases(c, lim)) {
      if (!s.caps.unsupported(d).empty()) continue;
      const fs::path dir = scratch / ("s" + std::to_string(s.evaluations));
      const CaseOutcome oc = evaluate(s, d, dir);
      if (!s.opt.keepWork) fs::remove_all(dir);
      if (oc.verdict != Verdict::kHolds && oc.signature() == signature) {
        c = d;
        changed = true;
        break;
      }
    }
  }
  return c;
}

std::string verdictName(Verdict v) {
  switch (v) {
    case Verdict::kHolds:
      return "holds";
    case Verdict::kFinding:
      return "finding";
    case Verdict::kFault:
      return "adapter-fault";
  }
  return "?";
}

// Step-time overhead of checkpointing, measured here, next to ckptcheck's own engine for the same segmenting.
// Three rounds, each running the adapter plain, the adapter checkpointed, the reference and the engine in turn;
// per run the median step after the first (which pays for warm-up: allocation, JIT compilation, caches); per
// configuration the fastest round, the one least disturbed by whatever else the machine was doing.
template <class T>
json timingTyped(Session& s, CaseSpec spec, const fs::path& dir) {
  constexpr int kRounds = 3;
  spec.steps = s.opt.timingSteps;
  const int L = static_cast<int>(spec.blocks.size());
  Chain<T> chain = buildChain<T>(spec);
  const CaseLayout layout = caseLayout(chain);
  const std::string caseDir = (dir / "case").string();
  writeCaseDir(caseDir, chain);
  auto median = [](std::vector<double> v) {
    if (v.size() > 1) v.erase(v.begin());
    if (v.empty()) return 0.0;
    std::sort(v.begin(), v.end());
    return v[v.size() / 2];
  };
  const double inf = std::numeric_limits<double>::infinity();
  double fp = inf, fc = inf, ep = inf, ec = inf;
  bool bitwise = true;
  int segments = static_cast<int>(std::lround(std::sqrt(static_cast<double>(L))));
  json options = json::object();
  std::string policy;
  for (int round = 0; round < kRounds; ++round) {
    const RunMeta pm = s.client.run(caseDir, (dir / "plain").string(), "plain", spec.steps, L);
    const RunMeta cm = s.client.run(caseDir, (dir / "checkpoint").string(), "checkpoint", spec.steps, L);
    if (round == 0) {
      const auto plain = readRunResults<T>((dir / "plain").string(), layout, spec.steps);
      const auto ck = readRunResults<T>((dir / "checkpoint").string(), layout, spec.steps);
      bitwise = compareSteps(plain, ck).bitwiseEqual;
      if (cm.raw.contains("segments") && cm.raw.at("segments").is_number_integer())
        segments = cm.raw.at("segments").get<int>();
      segments = std::clamp(segments, 1, L);
      options = cm.raw.value("options", json::object());
    }
    fp = std::min(fp, median(pm.stepSeconds));
    fc = std::min(fc, median(cm.stepSeconds));
    // ckptcheck's engine on the same case: the store-all reference vs uniform:k=segments, step by step.
    const Schedule uniform = makeSchedule(parsePolicy("uniform:k=" + std::to_string(segments)), caseChainCost(spec));
    policy = uniform.policy;
    Chain<T> refChain = buildChain<T>(spec), engChain = buildChain<T>(spec);
    validateSchedule(uniform, chainCost(engChain));
    std::vector<double> refSec, engSec;
    for (int st = 0; st < spec.steps; ++st) {
      const auto t0 = std::chrono::steady_clock::now();
      referenceStep(refChain, st);
      const auto t1 = std::chrono::steady_clock::now();
      executeStep(engChain, uniform, st);
      const auto t2 = std::chrono::steady_clock::now();
      refSec.push_back(std::chrono::duration<double>(t1 - t0).count());
      engSec.push_back(std::chrono::duration<double>(t2 - t1).count());
    }
    ep = std::min(ep, median(refSec));
    ec = std::min(ec, median(engSec));
  }
  json j;
  j["case"] = spec.name;
  j["blocks"] = L;
  j["dtype"] = dtypeName(spec.dtype);
  j["steps_per_run"] = spec.steps;
  j["rounds"] = kRounds;
  j["segments"] = segments;
  j["framework"] = {{"name", s.caps.framework},
                    {"plain_step_ms", fp * 1e3},
                    {"checkpoint_step_ms", fc * 1e3},
                    {"overhead", fp > 0 ? fc / fp - 1 : 0.0},
                    {"options", options},
                    {"bitwise_equal", bitwise}};
  j["ckptcheck"] = {{"policy", policy},
                    {"plain_step_ms", ep * 1e3},
                    {"checkpoint_step_ms", ec * 1e3},
                    {"overhead", ep > 0 ? ec / ep - 1 : 0.0}};
  return j;
}

void writeMarkdown(const fs::path& path, const json& r) {
  std::ofstream md(path);
  md << "# ckptcheck validate: " << r["adapter"]["label"].get<std::string>() << "\n\n";
  md << "- framework: " << r["adapter"]["framework"].get<std::string>() << " "
     << r["adapter"]["version"].get<std::string>() << "\n";
  md << "- result: **" << r["result"].get<std::string>() << "** after " << r["cases_passed"] << " passing case(s) of "
     << r["cases_requested"] << " requested, " << r["evaluations"] << " evaluations, " << r["adapter_runs"]
     << " adapter runs\n";
  if (r.contains("seed") && !r["seed"].is_null()) md << "- seed: " << r["seed"] << "\n";
  md << "\n| check | status | detail |\n|---|---|---|\n";
  for (const auto& c : r["checks"])
    md << "| " << c["name"].get<std::string>() << " | " << c["status"].get<std::string>() << " | "
       << c["detail"].get<std::string>() << " |\n";
  if (!r["findings"].empty()) {
    md << "\n## Findings\n";
    for (const auto& f : r["findings"]) {
      md << "\n### " << f["check"].get<std::string>() << ": " << f["summary"].get<std::string>() << "\n\n";
      md << f["message"].get<std::string>() << "\n\n";
      md << "- shrunk case: `" << f["case_file"].get<std::string>() << "` (" << f["case_summary"].get<std::string>()
         << ")\n";
      md << "- replay: `" << f["replay"].get<std::string>() << "`\n";
      if (f.contains("first_difference")) {
        const auto& d = f["first_difference"];
        md << "- first differing tensor: step " << d["step"] << " `" << d["tensor"].get<std::string>() << "`";
        if (d.contains("ulp_distance"))
          md << " at index " << d["first_index"] << ": plain " << d["expected"].get<std::string>() << ", checkpoint "
             << d["actual"].get<std::string>() << ", " << d["ulp_distance"] << " ULP; " << d["count"]
             << " element(s) differ";
        md << "\n";
      }
      if (f.contains("differences") && f["differences"].size() > 1) {
        md << "\n| step | tensor | elements differ | first index | ULP |\n|---|---|---|---|---|\n";
        for (const auto& d : f["differences"])
          md << "| " << d["step"] << " | " << d["tensor"].get<std::string>() << " | " << d.value("count", 0) << " | "
             << d.value("first_index", -1) << " | " << d.value("ulp_distance", uint64_t{0}) << " |\n";
      }
      md << "\n```json\n" << f["case"].dump(2) << "\n```\n";
    }
  }
  if (r.contains("fault") && !r["fault"].is_null()) {
    md << "\n## Adapter fault\n\n" << r["fault"]["message"].get<std::string>() << "\n";
    if (r["fault"].contains("case_file")) md << "\n- case: `" << r["fault"]["case_file"].get<std::string>() << "`\n";
  }
  if (r.contains("timing") && !r["timing"].empty()) {
    md << "\n## Step-time overhead of checkpointing\n\n| case | blocks | segments | "
       << r["adapter"]["framework"].get<std::string>()
       << " plain ms | checkpoint ms | overhead | ckptcheck plain ms | uniform ms | overhead "
          "|\n|---|---|---|---|---|---|---|---|---|\n";
    for (const auto& t : r["timing"]) {
      auto pct = [](double x) { return fmt(100 * x) + " %"; };
      md << "| " << t["case"].get<std::string>() << " | " << t["blocks"] << " | " << t["segments"] << " | "
         << fmt(t["framework"]["plain_step_ms"].get<double>()) << " | "
         << fmt(t["framework"]["checkpoint_step_ms"].get<double>()) << " | "
         << pct(t["framework"]["overhead"].get<double>()) << " | " << fmt(t["ckptcheck"]["plain_step_ms"].get<double>())
         << " | " << fmt(t["ckptcheck"]["checkpoint_step_ms"].get<double>()) << " | "
         << pct(t["ckptcheck"]["overhead"].get<double>()) << " |\n";
    }
  }
  md << "\nReference tolerance (check 2): relative " << r["tolerance"]["float"] << " (float), "
     << r["tolerance"]["double"] << " (double); worst seen: " << r["reference_error"].dump() << "\n";
}

std::string xmlEscape(const std::string& s) {
  std::string o;
  for (char c : s) {
    switch (c) {
      case '&':
        o += "&amp;";
        break;
      case '<':
        o += "&lt;";
        break;
      case '>':
        o += "&gt;";
        break;
      case '"':
        o += "&quot;";
        break;
      default:
        o += c;
    }
  }
  return o;
}

void writeJunit(const std::string& path, const json& r) {
  std::ofstream x(path);
  int failures = 0, errors = 0, skipped = 0;
  for (const auto& c : r["checks"]) {
    const std::string st = c["status"];
    failures += st == "finding";
    errors += st == "adapter-fault";
    skipped += st == "skipped";
  }
  const std::string suite = "ckptcheck validate " + r["adapter"]["label"].get<std::string>();
  x << "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<testsuites>\n  <testsuite name=\"" << xmlEscape(suite)
    << "\" tests=\"" << r["checks"].size() << "\" failures=\"" << failures << "\" errors=\"" << errors
    << "\" skipped=\"" << skipped << "\">\n";
  for (const auto& c : r["checks"]) {
    const std::string st = c["status"];
    x << "    <testcase classname=\"validate\" name=\"" << xmlEscape(c["name"].get<std::string>()) << "\"";
    if (st == "holds") {
      x << "/>\n";
      continue;
    }
    x << ">\n";
    const std::string detail = xmlEscape(c["detail"].get<std::string>());
    if (st == "finding")
      x << "      <failure message=\"" << detail << "\"/>\n";
    else if (st == "adapter-fault")
      x << "      <error message=\"" << detail << "\"/>\n";
    else
      x << "      <skipped message=\"" << detail << "\"/>\n";
    x << "    </testcase>\n";
  }
  x << "  </testsuite>\n</testsuites>\n";
}

}  // namespace

int runValidate(const ValidateOptions& o, std::ostream& out, std::ostream& err) {
  if (o.adapter.empty() == o.adapterCmd.empty())
    throw InputError("validate: give exactly one of --adapter NAME[:k=v,...] and --adapter-cmd \"COMMAND ARGS\"");
  if (o.cases < 0 || (o.cases == 0 && o.timingCases.empty()))
    throw InputError("validate: --cases must be >= 1 (0 only with --timing-case)");
  AdapterSpec spec = o.adapter.empty() ? commandAdapter(o.adapterCmd) : builtinAdapter(o.adapter);
  for (const auto& kv : o.options) {
    addOption(spec, kv);
    spec.replayArgs.push_back("--option");
    spec.replayArgs.push_back(kv);
  }
  const fs::path outDir = fs::absolute(o.outDir);
  fs::create_directories(outDir);
  const fs::path work = outDir / "work";
  AdapterClient client(spec, o.timeoutSeconds, (outDir / "logs").string(), !o.noServe);

  json report;
  report["tool"] = "ckptcheck validate";
  report["protocol"] = kProtocolVersion;
  report["adapter"] = {{"label", spec.label},
                       {"command", spec.argv},
                       {"options", spec.options},
                       {"framework", "unknown"},
                       {"version", "unknown"}};
  report["findings"] = json::array();
  report["fault"] = nullptr;
  report["timing"] = json::array();
  report["tolerance"] = {{"float", kReferenceTolFloat}, {"double", kReferenceTolDouble}};
  // Every field the writers read exists from the start, so a run that stops early (an adapter that cannot even
  // answer `capabilities`) still writes a complete report: nlohmann's const operator[] on a missing key is
  // undefined behaviour (the sanitizer build's assertion caught it).
  report["result"] = "";
  report["cases_requested"] = o.cases;
  report["cases_passed"] = 0;
  report["evaluations"] = 0;
  report["adapter_runs"] = 0;
  report["reference_error"] = nullptr;

  auto finish = [&](int code, const json& checks) {
    report["checks"] = checks;
    report["exit_code"] = code;
    std::ofstream(outDir / "validate.json") << report.dump(2) << "\n";
    writeMarkdown(outDir / "validate.md", report);
    if (!o.junitPath.empty()) writeJunit(o.junitPath, report);
    if (!o.keepWork) fs::remove_all(work);
    if (o.json) {
      out << report.dump(2) << "\n";
    } else {
      out << "validate " << spec.label << " (" << report["adapter"]["framework"].get<std::string>() << " "
          << report["adapter"]["version"].get<std::string>() << "): " << report["result"].get<std::string>() << "\n";
      for (const auto& c : checks)
        out << "  " << c["name"].get<std::string>() << ": " << c["status"].get<std::string>() << " - "
            << c["detail"].get<std::string>() << "\n";
      for (const auto& f : report["findings"]) {
        out << "finding (" << f["check"].get<std::string>() << "): " << f["message"].get<std::string>() << "\n"
            << "  shrunk case: " << f["case_file"].get<std::string>() << " (" << f["case_summary"].get<std::string>()
            << ")\n"
            << "  replay: " << f["replay"].get<std::string>() << "\n";
      }
      if (!report["fault"].is_null()) out << "adapter fault: " << report["fault"]["message"].get<std::string>() << "\n";
      for (const auto& t : report["timing"])
        out << "timing " << t["case"].get<std::string>() << " (" << t["blocks"] << " blocks, " << t["segments"]
            << " segments): " << t["framework"]["name"].get<std::string>() << " plain "
            << fmt(t["framework"]["plain_step_ms"].get<double>()) << " ms, checkpoint "
            << fmt(t["framework"]["checkpoint_step_ms"].get<double>()) << " ms (+"
            << fmt(100 * t["framework"]["overhead"].get<double>()) << " %); ckptcheck store-all "
            << fmt(t["ckptcheck"]["plain_step_ms"].get<double>()) << " ms, "
            << t["ckptcheck"]["policy"].get<std::string>() << " "
            << fmt(t["ckptcheck"]["checkpoint_step_ms"].get<double>()) << " ms (+"
            << fmt(100 * t["ckptcheck"]["overhead"].get<double>()) << " %)\n";
      out << "report: " << (outDir / "validate.md").string() << "\n";
    }
    return code;
  };
  auto faultChecks = [](const std::string& msg) {
    return json::array({{{"name", kAdapter}, {"status", "adapter-fault"}, {"detail", msg}}});
  };

  const Capabilities* capsPtr = nullptr;
  try {
    capsPtr = &client.capabilities();
  } catch (const AdapterError& e) {
    report["result"] = "adapter-fault";
    report["fault"] = {{"check", kAdapter}, {"message", e.what()}};
    return finish(kExitInfra, faultChecks(e.what()));
  }
  const Capabilities& caps = *capsPtr;
  report["adapter"]["framework"] = caps.framework;
  report["adapter"]["version"] = caps.version;
  report["adapter"]["capabilities"] = caps.raw;
  caps.checkOptions(spec.options);
  if (!caps.modes.empty() && (!caps.modes.count("plain") || !caps.modes.count("checkpoint")))
    throw InputError("validate: the adapter must offer modes plain and checkpoint");

  GenLimits lim = caps.limits(o.maxBlocks, o.maxSteps);
  if (!o.blocks.empty()) {
    for (const auto& b : o.blocks)
      if (b != "mlp" && b != "residual-bn" && b != "transformer")
        throw InputError("validate --blocks: unknown block kind '" + b + "' (mlp, residual-bn, transformer)");
    auto has = [&](const char* k) { return std::find(o.blocks.begin(), o.blocks.end(), k) != o.blocks.end(); };
    lim.mlp = lim.mlp && has("mlp");
    lim.residualBn = lim.residualBn && has("residual-bn");
    lim.transformer = lim.transformer && has("transformer");
  }
  if (!lim.mlp && !lim.residualBn && !lim.transformer)
    throw InputError("validate: no block kind left to generate (the adapter's capabilities and --blocks exclude all)");
  if ((!lim.floatType && !lim.doubleType) || (!lim.statefulRng && !lim.counterRng))
    throw InputError("validate: the adapter's capabilities leave no dtype or no generator model");
  report["limits"] = {
      {"max_blocks", lim.maxBlocks},   {"max_steps", lim.maxSteps},      {"mlp", lim.mlp},
      {"residual_bn", lim.residualBn}, {"transformer", lim.transformer}, {"dropout", lim.dropout},
      {"float", lim.floatType},        {"double", lim.doubleType},       {"stateful_rng", lim.statefulRng},
      {"counter_rng", lim.counterRng}};

  Session s{o, client, caps, work, {}, 0, std::nullopt, err};
  std::string replayBase = "ckptcheck validate " + shellJoin(spec.replayArgs);

  std::vector<CaseOutcome> failures;  // the reported findings and faults, each at its smallest case
  auto checksJson = [&](int passed) {
    json checks = json::array();
    auto add = [&](const char* name, bool reported, const std::string& holdsDetail) {
      json c = {{"name", name}};
      std::vector<const CaseOutcome*> mine;
      for (const auto& f : failures)
        if (f.check == name) mine.push_back(&f);
      if (!mine.empty()) {
        c["status"] = verdictName(mine.front()->verdict);
        std::string d;
        for (const auto* f : mine) d += (d.empty() ? "" : " | ") + f->message;
        c["detail"] = d;
      } else if (!reported) {
        c["status"] = "skipped";
        c["detail"] = "the adapter does not report it";
      } else {
        c["status"] = "holds";
        c["detail"] = holdsDetail;
      }
      checks.push_back(c);
    };
    const std::string n = failures.empty() ? "on " + std::to_string(passed) + " case(s)"
                                           : "no violation in " + std::to_string(s.evaluations) + " evaluated case(s)";
    add(kBitwise, true, "checkpoint vs plain bitwise equal " + n);
    add(kReference, true, "plain within tolerance of the reference (dropout off) " + n);
    add(kForwardCalls, caps.reportsForwardCalls, "forward calls per block as the mode implies " + n);
    add(kSavedBytes, caps.reportsMemory, "checkpoint saves no more activation bytes than plain " + n);
    add(kAdapter, true, "every run followed the protocol");
    return checks;
  };

  // Adds a failing case and its outcome to the report: the case file, the replay command, the differences.
  auto record = [&](const CaseSpec& c, const CaseOutcome& oc, const fs::path& dir) {
    fs::create_directories(dir);
    const fs::path caseFile = dir / "case.json";
    std::ofstream(caseFile) << caseToJson(c).dump(2) << "\n";
    const std::string replay =
        replayBase + " --case " + shellQuote(caseFile.string()) + " --out " + shellQuote((dir / "replay").string());
    json f;
    f["check"] = oc.check;
    f["message"] = oc.message;
    f["case"] = caseToJson(c);
    f["case_file"] = caseFile.string();
    f["case_summary"] = blockSummary(c);
    f["blocks"] = c.blocks.size();
    f["replay"] = replay;
    f["summary"] = oc.first ? oc.first->tensor + " differs" : oc.check;
    if (oc.first) f["first_difference"] = toJson(*oc.first);
    if (!oc.differences.empty()) f["differences"] = oc.differences;
    f["run_dir"] = dir.string();
    if (oc.verdict == Verdict::kFinding)
      report["findings"].push_back(f);
    else
      report["fault"] = f;
    failures.push_back(oc);
  };
  // Finishes the report; an adapter fault outranks a finding.
  auto conclude = [&](int passed) {
    bool fault = false, finding = false;
    for (const auto& f : failures) {
      fault = fault || f.verdict == Verdict::kFault;
      finding = finding || f.verdict == Verdict::kFinding;
    }
    report["cases_passed"] = passed;
    report["result"] = fault ? "adapter-fault" : finding ? "finding" : "holds";
    return finish(fault ? kExitInfra : finding ? kExitFinding : kExitOk, checksJson(passed));
  };
  auto stats = [&] {
    report["evaluations"] = s.evaluations;
    report["adapter_runs"] = client.runs();
    report["reference_error"] = {
        {"float", {{"cases", s.ref.cases[0]}, {"worst_over_tolerance", s.ref.worst[0]}, {"where", s.ref.where[0]}}},
        {"double", {{"cases", s.ref.cases[1]}, {"worst_over_tolerance", s.ref.worst[1]}, {"where", s.ref.where[1]}}}};
  };

  // Step-time overhead on the given cases, before any check (so a finding does not skip it).
  for (const auto& path : o.timingCases) {
    const CaseSpec c = loadCase(path);
    if (const std::string why = caps.unsupported(c); !why.empty())
      throw InputError("validate --timing-case " + path + ": the adapter does not support this case's " + why);
    try {
      report["timing"].push_back(
          withScalar(c.dtype, [&](auto t) { return timingTyped<decltype(t)>(s, c, work / ("timing-" + c.name)); }));
    } catch (const AdapterError& e) {
      stats();
      report["result"] = "adapter-fault";
      report["fault"] = {{"check", kAdapter}, {"message", e.what()}};
      return finish(kExitInfra, faultChecks(e.what()));
    }
  }
  if (o.cases == 0 && o.casePath.empty()) {
    stats();
    report["result"] = "not-checked";
    report["cases_requested"] = 0;
    report["cases_passed"] = 0;
    json checks = json::array();
    for (const char* n : {kBitwise, kReference, kForwardCalls, kSavedBytes})
      checks.push_back({{"name", n}, {"status", "skipped"}, {"detail", "--cases 0: timing only"}});
    return finish(kExitOk, checks);
  }

  // Replay: exactly one case.
  if (!o.casePath.empty()) {
    const CaseSpec c = loadCase(o.casePath);
    if (const std::string why = caps.unsupported(c); !why.empty())
      throw InputError("validate --case: the adapter does not support this case's " + why);
    report["mode"] = "replay";
    report["cases_requested"] = 1;
    report["seed"] = nullptr;
    const fs::path dir = outDir / "case";
    const CaseOutcome oc = evaluate(s, c, dir);
    stats();
    if (oc.verdict != Verdict::kHolds) {
      record(c, oc, dir);
      return conclude(0);
    }
    if (!o.keepWork) fs::remove_all(dir);
    return conclude(1);
  }

  report["mode"] = "random";
  report["cases_requested"] = o.cases;
  const uint64_t seed = o.seed ? *o.seed : std::random_device{}() * uint64_t{0x100000001} ^ std::random_device{}();
  report["seed"] = seed;

  // A first, fixed case: a broken adapter or a refused option shows here, not as a shrunk "finding".
  {
    const CaseSpec smoke = smokeCase(lim);
    const fs::path dir = outDir / "smoke";
    const CaseOutcome oc = evaluate(s, smoke, dir);
    if (oc.verdict == Verdict::kFault) {
      stats();
      record(smoke, oc, dir);
      return conclude(0);
    }
    if (!o.keepWork) fs::remove_all(dir);
  }

  {
    // RapidCheck announces its configuration on stderr the first time it reads it; the report has the seed.
    std::ostringstream sink;
    auto* saved = std::cerr.rdbuf(sink.rdbuf());
    rc::detail::configuration();
    std::cerr.rdbuf(saved);
  }
  rc::detail::TestParams params;
  params.seed = seed;
  params.maxSuccess = o.cases;
  params.maxSize = 100;
  params.maxDiscardRatio = 20;
  rc::detail::TestMetadata meta;
  meta.id = "validate " + spec.label;
  meta.description = meta.id;
  int counter = 0;
  std::optional<std::string> firstFailure;
  std::optional<CaseSpec> stateOnly;
  SilentListener listener;
  const auto result = rc::detail::checkTestable(
      [&] {
        const CaseSpec c = *genCase(lim);
        RC_PRE(caps.unsupported(c).empty());
        if (s.fatalInput) RC_FAIL("stopped: " + *s.fatalInput);
        CaseOutcome oc;
        const fs::path dir = work / ("e" + std::to_string(counter++));
        try {
          oc = evaluate(s, c, dir);
        } catch (const InputError& e) {
          s.fatalInput = e.what();
          RC_FAIL(e.what());
        }
        if (!o.keepWork) fs::remove_all(dir);
        if (oc.verdict == Verdict::kHolds) return;
        // A case where only state differs (BatchNorm's running statistics, the generator) is kept aside and
        // shrunk separately below: the search goes on for a case whose loss or gradients differ, which says more.
        if (oc.signature() == kStateOnly) {
          if (!stateOnly) stateOnly = c;
          return;
        }
        // Shrinking keeps the failure the search found: a smaller case that fails another way (only the
        // generator's state differs where gradients did) counts as passing, so the counterexample shows the
        // first failure at its smallest rather than drifting to a different, less telling one.
        if (!firstFailure) firstFailure = oc.signature();
        if (oc.signature() == *firstFailure) RC_FAIL(oc.check + ": " + oc.message);
      },
      meta, params, listener);
  stats();
  if (s.fatalInput) throw InputError(*s.fatalInput);

  if (result.template is<rc::detail::GaveUpResult>()) {
    throw InputError("validate: gave up: too many generated cases were outside the adapter's capabilities (" +
                     result.template get<rc::detail::GaveUpResult>().description + ")");
  }
  if (result.template is<rc::detail::Error>())
    throw std::runtime_error("validate: RapidCheck error: " + result.template get<rc::detail::Error>().description);

  // Runs a case found failing once more (it must fail again, else the adapter is not deterministic), shrinks it
  // further keeping how it fails, and records the smallest into `dir`, a directory that stays for people to look
  // at.
  auto finalize = [&](CaseSpec c, const std::string& foundAs, const fs::path& dir) {
    CaseOutcome oc = evaluate(s, c, work / ("confirm-" + dir.filename().string()));
    if (oc.verdict == Verdict::kHolds) {
      oc.verdict = Verdict::kFault;
      oc.check = kAdapter;
      oc.message = "the adapter is not deterministic: a case failed during the search (" + foundAs +
                   ") but passed when run again";
      record(c, oc, dir);
      return;
    }
    c = shrinkFurther(s, c, oc.signature(), lim, work / ("shrink-" + dir.filename().string()));
    record(c, evaluate(s, c, dir), dir);
  };

  int passed = 0;
  if (result.template is<rc::detail::SuccessResult>()) {
    passed = result.template get<rc::detail::SuccessResult>().numSuccess;
  } else {
    const auto& failure = result.template get<rc::detail::FailureResult>();
    passed = failure.numSuccess;
    std::optional<CaseSpec> shrunk;
    for (const auto& [type, value] : failure.counterExample) {
      try {
        shrunk = parseCaseText(value, "counterexample");
      } catch (const InputError&) {
      }
    }
    if (!shrunk)
      throw std::runtime_error("validate: cannot read back the shrunk counterexample: " + failure.description);
    const bool fault = !firstFailure || *firstFailure == kReference || *firstFailure == kAdapter;
    finalize(*shrunk, failure.description, outDir / (fault ? "fault" : "finding"));
  }
  if (stateOnly) finalize(*stateOnly, "only state differed", outDir / "finding-state");
  stats();
  return conclude(passed);
}

}  // namespace ckpt
