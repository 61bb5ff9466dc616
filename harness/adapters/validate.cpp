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
#include "cases/coverage.h"
#include "cases/generators.h"
#include "harness/adapters/adapter.h"
#include "harness/adapters/case_dir.h"
#include "harness/adapters/reference_check.h"
#include "harness/adapters/tolerance.h"
#include "harness/adapters/validate_case.h"
#include "harness/adapters/validate_report.h"
#include "harness/atomic_file.h"
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
using namespace validate_detail;


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
    makeValid(d);  // e.g. seq 1 with batch 1 leaves a residual-bn block a single row: batch 2 then
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
  with([](CaseSpec& d) { d.lr = 0.05; });
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

// The random search: RapidCheck generates cases from genCase(lim) with `seed` and shrinks the first one for which
// `fails(case, index, outcome)` says true; a failing outcome it says false of counts as passing (validate keeps
// such cases aside itself). `index` numbers the generated cases from 0. Each case runs in its own work folder.
struct SearchResult {
  int passed = 0;
  std::optional<CaseSpec> shrunk;  // the shrunk counterexample, when one failed
};
template <class Fails>
SearchResult searchRandomCases(Session& s, const GenLimits& lim, uint64_t seed, Fails&& fails) {
  {
    // RapidCheck announces its configuration on stderr the first time it reads it; the report has the seed.
    std::ostringstream sink;
    auto* saved = std::cerr.rdbuf(sink.rdbuf());
    rc::detail::configuration();
    std::cerr.rdbuf(saved);
  }
  rc::detail::TestParams params;
  params.seed = seed;
  params.maxSuccess = s.opt.cases;
  params.maxSize = 100;
  params.maxDiscardRatio = 20;
  rc::detail::TestMetadata meta;
  meta.id = "validate";
  meta.description = meta.id;
  int counter = 0;
  bool searching = true;  // false once RapidCheck shrinks: only the search's cases count for coverage
  SilentListener listener;
  const auto result = rc::detail::checkTestable(
      [&] {
        const CaseSpec c = *genCase(lim);
        RC_PRE(s.caps.unsupported(c).empty());
        if (s.fatalInput) RC_FAIL("stopped: " + *s.fatalInput);
        const int index = counter++;
        if (searching) s.coverage.add(c);
        CaseOutcome oc;
        const fs::path dir = s.work / ("e" + std::to_string(index));
        try {
          oc = evaluate(s, c, dir);
        } catch (const InputError& e) {
          s.fatalInput = e.what();
          RC_FAIL(e.what());
        }
        if (!s.opt.keepWork) fs::remove_all(dir);
        if (oc.verdict != Verdict::kHolds && fails(c, index, oc)) {
          searching = false;
          RC_FAIL(oc.check + ": " + oc.message);
        }
      },
      meta, params, listener);
  if (s.fatalInput) return {};
  if (result.template is<rc::detail::GaveUpResult>()) {
    throw InputError("validate: gave up: too many generated cases were outside the adapter's capabilities (" +
                     result.template get<rc::detail::GaveUpResult>().description + ")");
  }
  if (result.template is<rc::detail::Error>())
    throw std::runtime_error("validate: RapidCheck error: " + result.template get<rc::detail::Error>().description);
  SearchResult out;
  if (result.template is<rc::detail::SuccessResult>()) {
    out.passed = result.template get<rc::detail::SuccessResult>().numSuccess;
    return out;
  }
  const auto& failure = result.template get<rc::detail::FailureResult>();
  out.passed = failure.numSuccess;
  for (const auto& [type, value] : failure.counterExample) {
    try {
      out.shrunk = parseCaseText(value, "counterexample");
    } catch (const InputError&) {
    }
  }
  if (!out.shrunk)
    throw std::runtime_error("validate: cannot read back the shrunk counterexample: " + failure.description);
  return out;
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
  report["coverage"] = Coverage().toJson();

  auto finish = [&](int code, const json& checks) {
    report["checks"] = checks;
    report["exit_code"] = code;
    writeFileAtomic(outDir / "validate.json", report.dump(2) + "\n");
    writeFileAtomic(outDir / "validate.md", validateMarkdown(report));
    if (!o.junitPath.empty()) writeFileAtomic(o.junitPath, validateJunit(report));
    if (!o.keepWork) fs::remove_all(work);
    if (o.json) out << report.dump(2) << "\n";
    else out << validateSummaryText(report, (outDir / "validate.md").string());
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

  Session s{o, client, caps, work, {}, 0, std::nullopt, err, {}};
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
    add(kSavedBytes, caps.reportsMemory, "checkpoint saves activation bytes within the plan (saved_bytes_plan.h) " + n);
    add(kAdapter, true, "every run followed the protocol");
    return checks;
  };

  // Adds a failing case and its outcome to the report: the case file, the replay command, the differences.
  // `foundIn` says which evaluated case showed it first ("random case 17 of seed 5", "the fixed first case").
  auto record = [&](const CaseSpec& c, const CaseOutcome& oc, const fs::path& dir, const std::string& foundIn) {
    fs::create_directories(dir);
    const fs::path caseFile = dir / "case.json";
    writeFileAtomic(caseFile, caseToJson(c).dump(2) + "\n");
    const std::string replay =
        replayBase + " --case " + shellQuote(caseFile.string()) + " --out " + shellQuote((dir / "replay").string());
    json f;
    f["check"] = oc.check;
    f["message"] = oc.message;
    f["found_in"] = foundIn;
    f["case"] = caseToJson(c);
    f["case_file"] = caseFile.string();
    f["case_summary"] = blockSummary(c);
    f["blocks"] = c.blocks.size();
    f["replay"] = replay;
    f["summary"] = oc.first ? oc.first->tensor + " differs" : oc.check;
    if (oc.first) f["first_difference"] = toJson(*oc.first);
    if (!oc.differences.empty()) f["differences"] = oc.differences;
    addDiagnosis(f, oc);
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
    report["coverage"] = s.coverage.toJson();
    report["evaluations"] = s.evaluations;
    report["adapter_runs"] = client.runs();
    report["reference_error"] = {
        {"float",
         {{"cases", s.ref.cases[0]},
          {"worst_over_tolerance", s.ref.worst[0]},
          {"where", s.ref.where[0]},
          {"not_comparable", s.ref.notComparable}}},
        {"double", {{"cases", s.ref.cases[1]}, {"worst_over_tolerance", s.ref.worst[1]}, {"where", s.ref.where[1]}}}};
  };

  // Step-time overhead on the given cases, before any check (so a finding does not skip it).
  for (const auto& path : o.timingCases) {
    const CaseSpec c = loadCase(path);
    if (const std::string why = caps.unsupported(c); !why.empty())
      throw InputError("validate --timing-case " + path + ": the adapter does not support this case's " + why);
    try {
      report["timing"].push_back(timingOf(s, c, work / ("timing-" + c.name)));
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
      record(c, oc, dir, "the replayed case " + o.casePath);
      return conclude(0);
    }
    if (!o.keepWork) fs::remove_all(dir);
    return conclude(1);
  }

  report["mode"] = "random";
  report["cases_requested"] = o.cases;
  const uint64_t seed = o.seed ? *o.seed : std::random_device{}() * uint64_t{0x100000001} ^ std::random_device{}();
  report["seed"] = seed;

  // A first, fixed case: a broken adapter or a refused option shows here, not as a shrunk "finding". It counts
  // like every other case: a finding on it is shrunk and reported, whatever the random cases show.
  const CaseSpec smoke = smokeCase(lim);
  s.coverage.add(smoke);
  const CaseOutcome smokeOutcome = evaluate(s, smoke, outDir / "smoke");
  if (smokeOutcome.verdict == Verdict::kFault) {
    stats();
    record(smoke, smokeOutcome, outDir / "smoke", "the fixed first case");
    return conclude(0);
  }
  if (!o.keepWork) fs::remove_all(outDir / "smoke");

  // Which random case showed a failure first, for the report ("random case 17 of seed 5").
  struct Found {
    CaseSpec spec;
    int index = 0;
  };
  std::optional<Found> firstFailingCase, stateOnly;
  std::optional<std::string> firstFailure;
  const auto result = searchRandomCases(s, lim, seed, [&](const CaseSpec& c, int index, const CaseOutcome& oc) {
    // A case where only state differs (BatchNorm's running statistics, the generator) is kept aside and shrunk
    // separately below: the search goes on for a case whose loss or gradients differ, which says more.
    if (oc.signature() == kStateOnly) {
      if (!stateOnly) stateOnly = Found{c, index};
      return false;
    }
    // Shrinking keeps the failure the search found: a smaller case that fails another way (only the generator's
    // state differs where gradients did) counts as passing, so the counterexample shows the first failure at its
    // smallest rather than drifting to a different, less telling one.
    if (!firstFailure) {
      firstFailure = oc.signature();
      firstFailingCase = Found{c, index};
    }
    return oc.signature() == *firstFailure;
  });
  stats();
  if (s.fatalInput) throw InputError(*s.fatalInput);

  auto where = [&](int index) {
    return "random case " + std::to_string(index) + " of seed " + std::to_string(seed);
  };
  // Runs a case found failing once more (it must fail again, else the adapter is not deterministic), shrinks it
  // further keeping how it fails, and records the smallest into `dir`, a directory that stays for people to look
  // at.
  auto finalize = [&](CaseSpec c, const std::string& foundIn, const fs::path& dir) {
    CaseOutcome oc = evaluate(s, c, work / ("confirm-" + dir.filename().string()));
    if (oc.verdict == Verdict::kHolds) {
      oc.verdict = Verdict::kFault;
      oc.check = kAdapter;
      oc.message = "the adapter is not deterministic: " + foundIn + " failed during the search but passed when run again";
      record(c, oc, dir, foundIn);
      return;
    }
    c = shrinkFurther(s, c, oc.signature(), lim, work / ("shrink-" + dir.filename().string()));
    record(c, evaluate(s, c, dir), dir, foundIn);
  };

  int passed = smokeOutcome.verdict == Verdict::kHolds ? 1 : 0;
  if (result.shrunk) {
    const bool fault = !firstFailure || firstFailure->rfind(kReference, 0) == 0 || *firstFailure == kAdapter;
    finalize(*result.shrunk, where(firstFailingCase ? firstFailingCase->index : result.passed) + " (" +
                                 (firstFailure ? *firstFailure : std::string("?")) + ")",
             outDir / (fault ? "fault" : "finding"));
  }
  passed += result.passed;
  if (smokeOutcome.verdict == Verdict::kFinding) finalize(smoke, "the fixed first case (" + smokeOutcome.check + ")",
                                                          outDir / "finding-smoke");
  if (stateOnly) finalize(stateOnly->spec, where(stateOnly->index) + " (only state differed)", outDir / "finding-state");
  stats();
  return conclude(passed);
}

}  // namespace ckpt
