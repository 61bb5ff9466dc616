// One case of `ckptcheck validate`: the adapter's plain and checkpointed runs, checks 1-3, and the timing runs.
#include "harness/validate/validate_case.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <iostream>
#include <limits>
#include <sstream>

#include "cases/case_json.h"
#include "cases/param_sharing.h"
#include "cases/stochastic_layers.h"
#include "harness/validate/case_dir.h"
#include "harness/validate/reference_check.h"
#include "harness/validate/saved_bytes_plan.h"
#include "harness/validate/tolerance.h"
#include "harness/diagnose_steps.h"
#include "harness/dtype_dispatch.h"
#include "harness/engine/executor.h"
#include "harness/engine/policy.h"
#include "harness/text_format.h"
#include "reference/trainer.h"

namespace ckpt::validate_detail {

std::string fmt(double v) {
  std::ostringstream s;
  s.precision(3);
  s << v;
  return s.str();
}

namespace {

// Check 2 on `off` (the case with its random draws off and exact compute, in the dtype check 2 runs in): one
// plain adapter run against the reference trainer. `reuse` is the plain run of the case itself when that already
// is `off`. The gradients flowing through each block (in double) are measured too: a near-zero parameter gradient
// is judged by them (reference_check.h).
struct ReferenceOutcome {
  RefError error;
  bool deadGradients = false;  // every reference gradient of the first step is exactly zero
  bool notComparable = false;  // in float: a normalisation over identical values leaves the case to rounding
};
template <class U>
ReferenceOutcome referenceCheck(Session& s, const CaseSpec& off, const fs::path& dir, double tol,
                                const std::vector<StepResult<U>>* reuse) {
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
  ReferenceOutcome o;
  o.deadGradients = gradientsAllZero(ref);
  if constexpr (std::is_same_v<U, float>) {
    FloatConditioning cond = floatConditioning(off);
    CaseSpec exact = off;
    exact.dtype = DType::kDouble;
    Chain<double> exactChain = buildChain<double>(exact);
    addFloatRounding(cond, ref, trainReference(exactChain, 1));
    if (cond.degenerateBlock >= 0) {
      o.notComparable = true;  // rounding decides the case (reference_check.h): nothing to judge a translation by
      return o;
    }
    o.error = compareWithReference(ref, got, tol, kReferenceFloorFloat, &cond);
  } else {
    // In double too, a parameter gradient that is zero in exact arithmetic (a Linear bias before BatchNorm) is a
    // sum of the gradients flowing through its block, and BatchNorm over nearly equal rows makes those up to 10^6
    // times larger than every gradient the adapter reports (tests/data/validate/degenerate-bn-double.json): it is
    // judged by them. Only `around` applies: the rounding map is a float estimate.
    const FloatConditioning cond = floatConditioning(off);
    o.error = compareWithReference(ref, got, tol, kReferenceFloor, &cond);
  }
  return o;
}

}  // namespace

namespace {

// Check 3's forward calls, per micro-batch (a step of M micro-batches runs every block M times as often): once
// per block in the plain run; in the checkpointed run exactly 1 + the declared recompute count where the adapter
// declares counts (per micro-batch), else once for a block it does not list as recomputed and at least once for
// one it does. Nothing assumes a block is recomputed at most once (recursive and revolve-style schemes recompute
// some blocks several times).
std::optional<std::string> forwardCallsViolation(const RunMeta& pm, const RunMeta& cm, int steps, int L, int64_t m) {
  const std::string per = m > 1 ? " per micro-batch" : "";
  for (int st = 0; st < steps; ++st)
    for (int i = 0; i < L; ++i) {
      const int64_t p = (*pm.forwardCalls)[st][i], k = (*cm.forwardCalls)[st][i];
      std::string expect;
      bool ok;
      if (cm.recomputeCounts) {
        const int64_t want = 1 + (*cm.recomputeCounts)[st][i];
        ok = k == m * want;
        expect = std::to_string(want) + per + ": 1 + the " + std::to_string(want - 1) + " recompute(s) it declares";
      } else if (cm.recomputedBlocks) {
        const auto& r = *cm.recomputedBlocks;
        const bool listed = std::find(r.begin(), r.end(), i) != r.end();
        ok = listed ? k >= m : k == m;
        expect = (listed ? ">= 1" : "1") + per +
                 (listed ? " (it lists the block as recomputed)" : " (it does not list the block as recomputed)");
      } else {
        ok = k >= m;
        expect = ">= 1" + per;
      }
      if (p != m || !ok)
        return "step " + std::to_string(st) + " block " + std::to_string(i) + ": " + std::to_string(p) +
               " forward call(s) in the plain run (expected 1" + per + ") and " + std::to_string(k) +
               " in the checkpointed run (expected " + expect + ")" +
               (m > 1 ? " over " + std::to_string(m) + " micro-batches" : "");
    }
  return std::nullopt;
}

// Check 3's memory property against the plan (saved_bytes_plan.h), on the first step's bytes: the adapter's
// declared recomputed blocks planned per-block checkpointed vs store-all.
std::optional<std::string> savedBytesAgainstPlan(Session& s, const CaseSpec& spec, const RunMeta& pm,
                                                 const RunMeta& cm) {
  if (!cm.recomputedBlocks || cm.recomputedBlocks->empty() || pm.savedBytes->empty() || cm.savedBytes->empty())
    return std::nullopt;
  const SavedBytesPlan plan = planSavedBytes(spec, *cm.recomputedBlocks);
  const bool partial = cm.raw.value("saves_in_checkpoints", false);
  const int64_t plain = pm.savedBytes->front(), ck = cm.savedBytes->front();
  if (s.opt.verbose)
    s.err << "validate:   saved bytes plain " << plain << ", checkpointed " << ck << " ("
          << fmt(plain > 0 ? 1.0 * ck / plain : 0) << "); planned " << plan.storeAll << " / " << plan.checkpointed
          << " (" << fmt(plan.ratio()) << ")" << (partial ? ", partial" : "") << "\n";
  return savedBytesViolation(plain, ck, plan, partial);
}

// The protocol shows no dropout masks, drop-path decisions or RReLU slopes, and a recompute that draws from a
// fresh generator leaves the framework's own generator where the plain run left it, so a redrawn mask can look
// like any other difference. The case once more with every random draw off, plain and checkpointed (two adapter
// runs, only for a difference no class explained): when those agree bit for bit, the difference came from the
// random draws (dropoutOffDiagnosis, diagnose.h). randomnessOff keeps the compute precision: a recompute under
// another precision than its first forward is no random draw, and must not be classed as one.
template <class T>
bool agreesWithDropoutOff(Session& s, const CaseSpec& spec, const fs::path& dir, const CaseLayout& layout) {
  const CaseSpec off = randomnessOff(spec);
  Chain<T> chain = buildChain<T>(off);
  const fs::path d = dir / "dropout-off";
  const std::string caseDir = (d / "case").string();
  writeCaseDir(caseDir, chain);
  const int steps = off.steps, L = static_cast<int>(off.blocks.size());
  try {
    s.client.run(caseDir, (d / "plain").string(), "plain", steps, L);
    s.client.run(caseDir, (d / "checkpoint").string(), "checkpoint", steps, L);
    const auto plain = readRunResults<T>((d / "plain").string(), layout, steps);
    const auto ck = readRunResults<T>((d / "checkpoint").string(), layout, steps);
    return compareSteps(plain, ck).bitwiseEqual;
  } catch (const AdapterError&) {
    return false;  // the finding stands unexplained; a fault of these runs is not this case's verdict
  }
}

// A plain run that cannot be judged: a fault of check 2, whose comparison it makes meaningless.
CaseOutcome notJudged(std::string message) {
  CaseOutcome o;
  o.verdict = Verdict::kFault;
  o.check = kReference;
  o.message = std::move(message);
  return o;
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
    if (const auto why = firstNonFinite(plain))  // cannot be judged, against the reference or bitwise (compare.h)
      return notJudged("the adapter's plain run is not finite: " + *why + "; " + kNotJudged);
    cm = s.client.run(caseDir, (dir / "checkpoint").string(), "checkpoint", steps, L);
    ck = readRunResults<T>((dir / "checkpoint").string(), layout, steps);
    s.instruments.note(s.evaluations, "plain", pm);
    s.instruments.note(s.evaluations, "checkpoint", cm);

    // Check 2: the translation is faithful. Dropout off, as two generators' masks cannot agree; in double when
    // the adapter runs double, since float rounding amplified by an ill-conditioned case (BatchNorm over two
    // nearly equal rows) would hide a wrong translation behind a loose tolerance.
    // An adapter that runs float only is compared on the first step only: the rounding its ill-conditioned
    // gradients are allowed (reference_check.h) moves the parameters the later steps start from, which BatchNorm
    // over a few rows then amplifies past any tolerance; in double the update rule is checked over every step.
    // The case with its random draws off (cases/stochastic_layers.h: dropout and drop-path 0, RReLU's range its
    // midpoint) and exact compute: the reference does not model autocast's rounding of outputs.
    CaseSpec off = randomnessOff(spec);
    off.compute = Compute::kExact;
    const bool inDouble = s.caps.dtypes.count("double") > 0;
    if (inDouble) off.dtype = DType::kDouble;
    else off.steps = 1;
    const bool same = off == spec;
    const double tol = inDouble ? kReferenceTolDouble : referenceTolerance<T>();
    ReferenceOutcome r;
    if (inDouble) {
      const std::vector<StepResult<double>>* reuse = nullptr;
      if constexpr (std::is_same_v<T, double>) reuse = same ? &plain : nullptr;
      r = referenceCheck<double>(s, off, dir, tol, reuse);
    } else {
      r = referenceCheck<T>(s, off, dir, tol, same ? &plain : nullptr);
    }
    const RefError& e = r.error;
    const int di = inDouble || sizeof(T) == 8 ? 1 : 0;
    ++s.ref.cases[di];
    if (r.notComparable) ++s.ref.notComparable;
    if (e.ratio > s.ref.worst[di] || std::isnan(e.ratio)) {
      s.ref.worst[di] = e.ratio;
      s.ref.where[di] = e.describe(tol);
    }
    if (!(e.ratio <= 1)) {
      o.verdict = Verdict::kFault;
      o.check = kReference;
      o.deadGradients = r.deadGradients;
      o.message = std::string("the adapter's plain run (random draws off, ") + dtypeName(off.dtype) +
                  ") is not the case's model: " + e.describe(tol) + "; " + fmt(e.ratio) + " x the allowance";
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
    std::vector<NamedMat<T>> initial;  // the buffers before step 0: what a second update is judged from
    for (const auto* b : chain.buffers()) initial.push_back({b->name, b->value});
    o.diagnosis = diagnoseSteps(plain, ck, initial, kRoundingLevelUlp, spec.microBatches);
    if (o.diagnosis && worthDropoutOffRerun(*o.diagnosis, drawsRandomNumbers(spec)) &&
        agreesWithDropoutOff<T>(s, spec, dir, layout))
      o.diagnosis = dropoutOffDiagnosis();
    o.message = "checkpointed run differs from the plain run: " + toText(c.differences.front()) + " (" +
                std::to_string(c.differences.size()) + " tensor(s) differ)";
    if (o.diagnosis)
      o.message += "; class " + std::string(findingClassName(o.diagnosis->cls)) + ": " + o.diagnosis->why;
    return o;
  }

  // Check 3: what the adapter reports about its own run.
  if (pm.forwardCalls && cm.forwardCalls) {
    if (auto why = forwardCallsViolation(pm, cm, steps, L, spec.microBatches)) {
      o.verdict = Verdict::kFinding;
      o.check = kForwardCalls;
      o.message = *why;
      return o;
    }
  }
  // The plan tapes a frozen block as any other, while a framework keeps less for it (a frozen Linear saves no
  // input for a weight gradient; blocks that need no backward at all save nothing): PyTorch saves 433 bytes for
  // one frozen transformer block where the plan counts 624, and 64 bytes for one frozen mlp block whose
  // checkpoint holds 96. Neither rule below bounds a correct run there, so cases with frozen blocks are not held
  // to them (PROTOCOL.md, "The memory property").
  if (pm.savedBytes && cm.savedBytes && !hasFrozenBlock(spec)) {
    if (auto why = savedBytesAgainstPlan(s, spec, pm, cm)) {
      o.verdict = Verdict::kFinding;
      o.check = kSavedBytes;
      o.message = *why;
      return o;
    }
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

}  // namespace

void InstrumentsChanged::note(int evaluation, const std::string& mode, const RunMeta& m) {
  if (!m.instrumentsChanged) return;
  if (runs++ == 0)
    first = "case " + std::to_string(evaluation) + ", the " + mode + " run: " + escapeControl(*m.instrumentsChanged);
}

void addDiagnosis(json& finding, const CaseOutcome& o) {
  if (o.diagnosis) finding["diagnosis"] = toJson(*o.diagnosis);
}

CaseOutcome evaluate(Session& s, const CaseSpec& spec, const fs::path& dir) {
  ++s.evaluations;
  if (s.opt.verbose) s.err << "validate: case " << s.evaluations << ": " << caseToJson(spec).dump() << "\n";
  CaseOutcome o = withScalar(spec.dtype, [&](auto t) { return evaluateTyped<decltype(t)>(s, spec, dir); });
  if (s.opt.verbose && o.verdict != Verdict::kHolds) s.err << "validate:   -> " << o.check << ": " << o.message << "\n";
  return o;
}

namespace {
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
  double fp = inf, fc = inf, ep = inf, ec = inf, tp = inf;
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
      if (const auto why = firstNonFinite(plain))  // its "bitwise_equal" would say nothing (compare.h)
        throw AdapterError("timing case '" + spec.name + "': the adapter's plain run is not finite: " + *why + "; " +
                           kNotJudged);
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
    // The overhead compares two steps that both hand back every result; the plain step next to the framework's
    // is the training step alone, as the framework's timed step is (StepResults::kLossOnly).
    Chain<T> refChain = buildChain<T>(spec), engChain = buildChain<T>(spec), plainChain = buildChain<T>(spec);
    validateSchedule(uniform, chainCost(engChain));
    std::vector<double> refSec, engSec, plainSec;
    for (int st = 0; st < spec.steps; ++st) {
      const auto t0 = std::chrono::steady_clock::now();
      referenceStep(refChain, st);
      const auto t1 = std::chrono::steady_clock::now();
      executeStep(engChain, uniform, st);
      const auto t2 = std::chrono::steady_clock::now();
      referenceStep(plainChain, st, StepResults::kLossOnly);
      const auto t3 = std::chrono::steady_clock::now();
      refSec.push_back(std::chrono::duration<double>(t1 - t0).count());
      engSec.push_back(std::chrono::duration<double>(t2 - t1).count());
      plainSec.push_back(std::chrono::duration<double>(t3 - t2).count());
    }
    ep = std::min(ep, median(refSec));
    ec = std::min(ec, median(engSec));
    tp = std::min(tp, median(plainSec));
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
                    {"plain_step_ms", tp * 1e3},
                    {"store_all_step_ms", ep * 1e3},
                    {"checkpoint_step_ms", ec * 1e3},
                    {"overhead", ep > 0 ? ec / ep - 1 : 0.0}};
  return j;
}

}  // namespace

json timingOf(Session& s, const CaseSpec& spec, const fs::path& dir) {
  return withScalar(spec.dtype, [&](auto t) { return timingTyped<decltype(t)>(s, spec, dir); });
}

}  // namespace ckpt::validate_detail
