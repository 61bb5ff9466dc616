#include "harness/validate/validate.h"

#include <algorithm>
#include <filesystem>
#include <random>

#include "cases/block_kind.h"
#include "cases/case_json.h"
#include "cases/case_summary.h"
#include "cases/compute_precision.h"
#include "cases/coverage.h"
#include "cases/generators.h"
#include "cases/lm_case.h"
#include "cases/param_sharing.h"
#include "cases/stochastic_layers.h"
#include "harness/validate/adapter.h"
#include "harness/validate/case_dir.h"
#include "harness/validate/reference_check.h"
#include "harness/validate/tolerance.h"
#include "harness/validate/validate_case.h"
#include "harness/validate/validate_cases.h"
#include "harness/validate/validate_report.h"
#include "harness/validate/work_dir.h"
#include "harness/atomic_file.h"
#include "harness/compare.h"
#include "harness/dtype_dispatch.h"
#include "harness/engine/executor.h"
#include "harness/engine/policy.h"
#include "harness/exit_codes.h"
#include "harness/random_search.h"
#include "reference/trainer.h"

namespace ckpt {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;
using namespace validate_detail;

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

// Shrinking runs the adapter once per candidate; a bound keeps a pathological adapter from running for hours.
constexpr int kMaxShrinkTrials = 2000;
// Cases outside the adapter's capabilities are skipped; after this many per requested case the search gives up.
constexpr int kMaxDiscardsPerCase = 20;

// A random case that failed during the search, with its shrink tree.
struct Failing {
  int64_t index = 0;
  rc::Shrinkable<CaseSpec> tree;
  std::string signature;  // CaseOutcome::signature(): what shrinking must keep
};

// One run of `ckptcheck validate`, in the order it happens: connect to the adapter, time the --timing-case cases,
// then check a replayed case or random ones, shrink what fails, and write the report. Every step that ends the
// run returns the exit code through finish(), which writes the report files first.
class ValidateRun {
 public:
  ValidateRun(const ValidateOptions& o, std::ostream& out, std::ostream& err)
      : o_(o),
        out_(out),
        err_(err),
        spec_(adapterSpec(o)),
        outDir_(fs::absolute(o.outDir)),
        workDir_(outDir_, o.keepWork),
        work_(workDir_.path()),
        client_(spec_, o.timeoutSeconds, (outDir_ / "logs").string(), !o.noServe),
        replayBase_("ckptcheck validate " + shellJoin(spec_.replayArgs)) {
    report_ = initialReport();
  }

  int run() {
    if (auto code = connect()) return *code;
    if (auto code = measureTiming()) return *code;
    if (o_.cases == 0 && o_.casePath.empty()) return timingOnly();
    if (!o_.casePath.empty()) return replay();
    return randomCases();
  }

 private:
  static AdapterSpec adapterSpec(const ValidateOptions& o) {
    AdapterSpec spec = o.adapter.empty() ? commandAdapter(o.adapterCmd) : builtinAdapter(o.adapter);
    for (const auto& kv : o.options) {
      addOption(spec, kv);
      spec.replayArgs.push_back("--option");
      spec.replayArgs.push_back(kv);
    }
    return spec;
  }

  // Every field the writers read exists from the start, so a run that stops early (an adapter that cannot even
  // answer `capabilities`) still writes a complete report: nlohmann's const operator[] on a missing key is
  // undefined behaviour (the sanitizer build's assertion caught it).
  json initialReport() const {
    json r;
    r["tool"] = "ckptcheck validate";
    r["protocol"] = kProtocolVersion;
    r["adapter"] = {{"label", spec_.label},
                    {"command", spec_.argv},
                    {"options", spec_.options},
                    {"framework", "unknown"},
                    {"version", "unknown"}};
    r["findings"] = json::array();
    r["fault"] = nullptr;
    r["timing"] = json::array();
    r["tolerance"] = {{"float", kReferenceTolFloat}, {"double", kReferenceTolDouble}};
    r["result"] = "";
    r["cases_requested"] = o_.cases;
    r["cases_passed"] = 0;
    r["evaluations"] = 0;
    r["adapter_runs"] = 0;
    r["reference_error"] = nullptr;
    r["coverage"] = Coverage().toJson();
    return r;
  }

  // The adapter's capabilities, the options it accepts and the generator limits they leave; an adapter that cannot
  // answer ends the run as an adapter fault.
  std::optional<int> connect() {
    try {
      caps_ = &client_.capabilities();
    } catch (const AdapterError& e) {
      return adapterFault(e.what());
    }
    report_["adapter"]["framework"] = caps_->framework;
    report_["adapter"]["version"] = caps_->version;
    report_["adapter"]["capabilities"] = caps_->raw;
    caps_->checkOptions(spec_.options);
    if (!caps_->modes.empty() && (!caps_->modes.count("plain") || !caps_->modes.count("checkpoint")))
      throw InputError("validate: the adapter must offer modes plain and checkpoint");
    lim_ = limitsFor(*caps_);
    session_.emplace(Session{o_, client_, *caps_, work_, {}, 0, std::nullopt, err_, {}, {}});
    return std::nullopt;
  }

  GenLimits limitsFor(const Capabilities& caps) {
    GenLimits lim = caps.limits(o_.maxBlocks, o_.maxSteps);
    for (const auto& b : o_.blocks)
      if (!findBlockKind(b))
        throw InputError("validate --blocks: unknown block kind '" + b + "' (" + blockKindNames() + ")");
    std::vector<std::string> kinds;  // those random cases may draw
    for (BlockKind k : blockKinds()) {
      if (!o_.blocks.empty() && std::find(o_.blocks.begin(), o_.blocks.end(), k->name) == o_.blocks.end())
        lim.excludedKinds.push_back(k);
      if (lim.allows(k)) kinds.push_back(k->name);
    }
    if (kinds.empty())
      throw InputError(
          "validate: no block kind left to generate (the adapter's capabilities and --blocks exclude all)");
    if (o_.params) {
      const std::vector<std::string> known = {"frozen",    "shared", "no_input_grad", "micro_batches", "tokens",
                                              "drop_path", "rrelu",  "bf16",          "moe",           "none"};
      for (const auto& f : *o_.params)
        if (std::find(known.begin(), known.end(), f) == known.end())
          throw InputError(
              "validate --params: unknown feature '" + f +
              "' (frozen, shared, no_input_grad, micro_batches, tokens, drop_path, rrelu, bf16, moe, none)");
      auto wants = [&](const char* f) {
        return std::find(o_.params->begin(), o_.params->end(), f) != o_.params->end();
      };
      lim.frozen = lim.frozen && wants("frozen");
      lim.share = lim.share && wants("shared");
      lim.noInputGrad = lim.noInputGrad && wants("no_input_grad");
      lim.microBatches = lim.microBatches && wants("micro_batches");
      lim.tokens = lim.tokens && wants("tokens");
      lim.dropPath = lim.dropPath && wants("drop_path");
      lim.rrelu = lim.rrelu && wants("rrelu");
      lim.bf16 = lim.bf16 && wants("bf16");
      lim.moe = lim.moe && wants("moe");
      // Not wanted: no moe block anywhere, the fixed first case's included (its kind is placed by a case-level
      // draw, which lim.moe turns off, but the first case takes every kind the limits allow).
      if (const BlockKind moe = findBlockKind("moe"); !lim.moe && moe && lim.allows(moe)) {
        lim.excludedKinds.push_back(moe);
        kinds.erase(std::remove(kinds.begin(), kinds.end(), moe->name), kinds.end());
        if (kinds.empty()) throw InputError("validate: --blocks moe needs moe in --params");
      }
    }
    if ((!lim.floatType && !lim.doubleType) || (!lim.statefulRng && !lim.counterRng))
      throw InputError("validate: the adapter's capabilities leave no dtype or no generator model");
    report_["limits"] = {{"max_blocks", lim.maxBlocks},
                         {"max_steps", lim.maxSteps},
                         {"blocks", kinds},
                         {"dropout", lim.dropout},
                         {"float", lim.floatType},
                         {"double", lim.doubleType},
                         {"stateful_rng", lim.statefulRng},
                         {"counter_rng", lim.counterRng},
                         {"frozen", lim.frozen},
                         {"shared", lim.share},
                         {"no_input_grad", lim.noInputGrad},
                         {"micro_batches", lim.microBatches},
                         {"tokens", lim.tokens},
                         {"drop_path", lim.dropPath},
                         {"rrelu", lim.rrelu},
                         {"bf16", lim.bf16},
                         {"moe", lim.moe}};
    return lim;
  }

  // Step-time overhead on the given cases, before any check (so a finding does not skip it).
  std::optional<int> measureTiming() {
    for (const auto& path : o_.timingCases) {
      CaseSpec c = loadCase(path);
      // A case that draws no random numbers computes the same under either generator model, so an adapter that
      // has only the other one times it under that (resnet-bn: counter-based, dropout 0, timed against PyTorch).
      CaseSpec twin = c;
      twin.rng = twin.rng == RngModel::kCounter ? RngModel::kStateful : RngModel::kCounter;
      if (!caps_->unsupported(c).empty() && caps_->unsupported(twin).empty() && !drawsRandomNumbers(c)) c = twin;
      if (const std::string why = caps_->unsupported(c); !why.empty())
        throw InputError("validate --timing-case " + path + ": the adapter does not support this case's " + why);
      try {
        // On disk, not in the scratch directory: a timed case may be as large as a training run's model.
        const fs::path dir = outDir_ / "work" / ("timing-" + c.name);
        report_["timing"].push_back(timingOf(*session_, c, dir));
        if (!o_.keepWork) fs::remove_all(outDir_ / "work");
      } catch (const AdapterError& e) {
        stats();
        return adapterFault(e.what());
      }
    }
    return std::nullopt;
  }

  int timingOnly() {
    stats();
    report_["result"] = "not-checked";
    report_["cases_requested"] = 0;
    report_["cases_passed"] = 0;
    json checks = json::array();
    for (const char* n : {kBitwise, kReference, kForwardCalls, kSavedBytes})
      checks.push_back({{"name", n}, {"status", "skipped"}, {"detail", "--cases 0: timing only"}});
    return finish(kExitOk, checks);
  }

  // --case FILE: exactly one case.
  int replay() {
    const CaseSpec c = loadCase(o_.casePath);
    if (const std::string why = caps_->unsupported(c); !why.empty())
      throw InputError("validate --case: the adapter does not support this case's " + why);
    report_["mode"] = "replay";
    report_["cases_requested"] = 1;
    report_["seed"] = nullptr;
    const fs::path dir = outDir_ / "case";
    const CaseOutcome oc = evaluate(*session_, c, dir);
    stats();
    if (oc.verdict != Verdict::kHolds) {
      record(c, oc, dir, "the replayed case " + o_.casePath);
      return conclude(0);
    }
    if (!o_.keepWork) fs::remove_all(dir);
    return conclude(1);
  }

  int randomCases() {
    report_["mode"] = "random";
    report_["cases_requested"] = o_.cases;
    seed_ = o_.seed ? *o_.seed : std::random_device{}() * uint64_t{0x100000001} ^ std::random_device{}();
    report_["seed"] = seed_;
    // A first, fixed case: a broken adapter or a refused option shows here, not as a shrunk "finding". It counts
    // like every other case: a finding on it is shrunk and reported, whatever the random cases show.
    const CaseSpec smoke = smokeCase(lim_);
    session_->coverage.add(smoke);
    const CaseOutcome smokeOutcome = evaluate(*session_, smoke, outDir_ / "smoke");
    if (smokeOutcome.verdict == Verdict::kFault) {
      stats();
      record(smoke, smokeOutcome, outDir_ / "smoke", "the fixed first case");
      return conclude(0);
    }
    if (!o_.keepWork) fs::remove_all(outDir_ / "smoke");

    int passed = smokeOutcome.verdict == Verdict::kHolds ? 1 : 0;
    std::optional<Failing> first, stateOnly;
    passed += searchRandom(first, stateOnly);
    stats();
    if (first) {
      const bool fault = first->signature.rfind(kReference, 0) == 0 || first->signature == kAdapter;
      finalize(first->tree, where(first->index) + " (" + first->signature + ")",
               outDir_ / (fault ? "fault" : "finding"));
    }
    if (smokeOutcome.verdict == Verdict::kFinding)
      finalize(rc::shrinkable::just(smoke), "the fixed first case (" + smokeOutcome.check + ")",
               outDir_ / "finding-smoke");
    if (stateOnly)
      finalize(stateOnly->tree, where(stateOnly->index) + " (only state differed)", outDir_ / "finding-state");
    stats();
    return conclude(passed);
  }

  // Random case i of the seed (harness/random_search.h), skipping cases outside the adapter's capabilities, until
  // o.cases cases ran or one failed. A case where only state differs (BatchNorm's running statistics, the
  // generator) is kept aside in `stateOnly` and the search goes on for a case whose loss or gradients differ, which
  // says more. Returns the number of cases that did not end the search.
  int searchRandom(std::optional<Failing>& first, std::optional<Failing>& stateOnly) {
    const auto gen = genCase(lim_);
    int passed = 0, discarded = 0;
    for (int64_t i = 0; passed < o_.cases; ++i) {
      rc::Shrinkable<CaseSpec> tree = search::drawCase(gen, seed_, i);
      const CaseSpec c = tree.value();
      if (!caps_->unsupported(c).empty()) {
        if (++discarded > kMaxDiscardsPerCase * o_.cases)
          throw InputError("validate: gave up: too many generated cases were outside the adapter's capabilities (" +
                           std::to_string(discarded) + " skipped)");
        continue;
      }
      session_->coverage.add(c);
      const fs::path dir = work_ / ("e" + std::to_string(i));
      const CaseOutcome oc = evaluate(*session_, c, dir);
      if (!o_.keepWork) fs::remove_all(dir);
      if (oc.verdict != Verdict::kHolds && oc.signature() != kStateOnly) {
        first = Failing{i, std::move(tree), oc.signature()};
        return passed;
      }
      if (oc.verdict != Verdict::kHolds && !stateOnly) stateOnly = Failing{i, std::move(tree), oc.signature()};
      ++passed;
    }
    return passed;
  }

  std::string where(int64_t index) const {
    return "random case " + std::to_string(index) + " of seed " + std::to_string(seed_);
  }

  // Runs a case found failing once more (it must fail again, else the adapter is not deterministic), shrinks it
  // keeping how it fails — first along its RapidCheck shrink tree, then through simplerCases, which also changes
  // what RapidCheck's choices do not shrink (block kinds, activations) — and records the smallest into `dir`, a
  // directory that stays for people to look at.
  void finalize(const rc::Shrinkable<CaseSpec>& tree, const std::string& foundIn, const fs::path& dir) {
    const CaseSpec found = tree.value();
    CaseOutcome oc = evaluate(*session_, found, work_ / ("confirm-" + dir.filename().string()));
    if (oc.verdict == Verdict::kHolds) {
      oc.verdict = Verdict::kFault;
      oc.check = kAdapter;
      oc.message =
          "the adapter is not deterministic: " + foundIn + " failed during the search but passed when run again";
      record(found, oc, dir, foundIn);
      return;
    }
    const fs::path scratch = work_ / ("shrink-" + dir.filename().string());
    // A finding on a language-model case stays one: what it shows may live in the embedding or the head (a
    // frozen embedding feeding a reentrant checkpoint, a tied head's gradient), and a dense case that fails the
    // same way says less about the model the user runs. A dense finding never becomes a token case.
    auto stillFails = [&, signature = oc.signature(), lm = isLanguageModel(found)](const CaseSpec& d) {
      if (!caps_->unsupported(d).empty() || isLanguageModel(d) != lm) return false;
      const fs::path at = scratch / ("s" + std::to_string(session_->evaluations));
      const CaseOutcome r = evaluate(*session_, d, at);
      if (!o_.keepWork) fs::remove_all(at);
      return r.verdict != Verdict::kHolds && r.signature() == signature;
    };
    const CaseSpec shrunk = search::shrinkGreedy(tree, stillFails, kMaxShrinkTrials).value;
    const auto simpler = [lim = lim_](const CaseSpec& c) { return simplerCases(c, lim); };
    const CaseSpec smallest =
        search::shrinkGreedy(search::candidateTree(shrunk, simpler), stillFails, kMaxShrinkTrials).value;
    record(smallest, evaluate(*session_, smallest, dir), dir, foundIn);
  }

  // Adds a failing case and its outcome to the report: the case file, the replay command, the differences.
  // `foundIn` says which evaluated case showed it first ("random case 17 of seed 5", "the fixed first case").
  void record(const CaseSpec& c, const CaseOutcome& oc, const fs::path& dir, const std::string& foundIn) {
    fs::create_directories(dir);
    const fs::path caseFile = dir / "case.json";
    writeFileAtomic(caseFile, caseToJson(c).dump(2) + "\n");
    json f;
    f["check"] = oc.check;
    f["message"] = oc.message;
    f["found_in"] = foundIn;
    f["case"] = caseToJson(c);
    f["case_file"] = caseFile.string();
    f["case_summary"] = caseSummary(c);
    f["blocks"] = c.blocks.size();
    f["replay"] =
        replayBase_ + " --case " + shellQuote(caseFile.string()) + " --out " + shellQuote((dir / "replay").string());
    f["summary"] = oc.first ? oc.first->tensor + " differs" : oc.check;
    if (oc.first) f["first_difference"] = toJson(*oc.first);
    if (!oc.differences.empty()) f["differences"] = oc.differences;
    addDiagnosis(f, oc);
    f["run_dir"] = dir.string();
    if (oc.verdict == Verdict::kFinding) report_["findings"].push_back(f);
    else report_["fault"] = f;
    failures_.push_back(oc);
  }

  void stats() {
    const Session& s = *session_;
    report_["coverage"] = s.coverage.toJson();
    report_["evaluations"] = s.evaluations;
    report_["adapter_runs"] = client_.runs();
    report_["instruments_changed"] = s.instruments.toJson();
    report_["reference_error"] = {
        {"float",
         {{"cases", s.ref.cases[0]},
          {"worst_over_tolerance", s.ref.worst[0]},
          {"where", s.ref.where[0]},
          {"not_comparable", s.ref.notComparable}}},
        {"double", {{"cases", s.ref.cases[1]}, {"worst_over_tolerance", s.ref.worst[1]}, {"where", s.ref.where[1]}}}};
  }

  // The checks' statuses: each the first failure recorded for it, or holds / skipped.
  json checksJson(int passed) const {
    json checks = json::array();
    auto add = [&](const char* name, bool reported, const std::string& holdsDetail) {
      json c = {{"name", name}};
      std::string detail;
      const CaseOutcome* firstOfCheck = nullptr;
      for (const auto& f : failures_) {
        if (f.check != name) continue;
        if (!firstOfCheck) firstOfCheck = &f;
        detail += (detail.empty() ? "" : " | ") + f.message;
      }
      if (firstOfCheck) {
        c["status"] = verdictName(firstOfCheck->verdict);
        c["detail"] = detail;
      } else {
        c["status"] = reported ? "holds" : "skipped";
        c["detail"] = reported ? holdsDetail : "the adapter does not report it";
      }
      checks.push_back(c);
    };
    const std::string n = failures_.empty()
                              ? "on " + std::to_string(passed) + " case(s)"
                              : "no violation in " + std::to_string(session_->evaluations) + " evaluated case(s)";
    add(kBitwise, true, "checkpoint vs plain bitwise equal " + n);
    add(kReference, true, "plain within tolerance of the reference (random draws off) " + n);
    add(kForwardCalls, caps_->reportsForwardCalls, "forward calls per block as the mode implies " + n);
    const InstrumentsChanged& changed = session_->instruments;
    add(kSavedBytes, caps_->reportsMemory,
        "checkpoint saves activation bytes within the plan (saved_bytes_plan.h) " + n +
            (changed.runs == 0 ? std::string()
                               : "; not measured in " + std::to_string(changed.runs) +
                                     " run(s) whose measuring pass changed the run (first: " + changed.first + ")"));
    add(kAdapter, true, "every run followed the protocol");
    return checks;
  }

  // Finishes the report; an adapter fault outranks a finding.
  int conclude(int passed) {
    bool fault = false, finding = false;
    for (const auto& f : failures_) {
      fault = fault || f.verdict == Verdict::kFault;
      finding = finding || f.verdict == Verdict::kFinding;
    }
    report_["cases_passed"] = passed;
    report_["result"] = fault ? "adapter-fault" : finding ? "finding" : "holds";
    return finish(fault ? kExitInfra : finding ? kExitFinding : kExitOk, checksJson(passed));
  }

  int adapterFault(const std::string& msg) {
    report_["result"] = "adapter-fault";
    report_["fault"] = {{"check", kAdapter}, {"message", msg}};
    return finish(kExitInfra, json::array({{{"name", kAdapter}, {"status", "adapter-fault"}, {"detail", msg}}}));
  }

  // Writes the report files (atomically) and the summary; returns `code`.
  int finish(int code, const json& checks) {
    report_["checks"] = checks;
    report_["exit_code"] = code;
    writeFileAtomic(outDir_ / "validate.json", report_.dump(2) + "\n");
    writeFileAtomic(outDir_ / "validate.md", validateMarkdown(report_));
    if (!o_.junitPath.empty()) writeFileAtomic(o_.junitPath, validateJunit(report_));
    workDir_.remove();
    std::error_code ec;
    if (!o_.keepWork) fs::remove_all(outDir_ / "work", ec);  // a timed case's, when the adapter failed on it
    if (o_.json) out_ << report_.dump(2) << "\n";
    else out_ << validateSummaryText(report_, (outDir_ / "validate.md").string());
    return code;
  }

  const ValidateOptions& o_;
  std::ostream& out_;
  std::ostream& err_;
  AdapterSpec spec_;
  fs::path outDir_;
  WorkDir workDir_;  // before work_, which is its path
  fs::path work_;
  AdapterClient client_;
  std::string replayBase_;
  json report_;
  const Capabilities* caps_ = nullptr;
  GenLimits lim_;
  std::optional<Session> session_;  // once the adapter answered
  uint64_t seed_ = 0;
  std::vector<CaseOutcome> failures_;  // the reported findings and faults, each at its smallest case
};

}  // namespace

int runValidate(const ValidateOptions& o, std::ostream& out, std::ostream& err) {
  if (o.adapter.empty() == o.adapterCmd.empty())
    throw InputError("validate: give exactly one of --adapter NAME[:k=v,...] and --adapter-cmd \"COMMAND ARGS\"");
  if (o.cases < 0 || (o.cases == 0 && o.timingCases.empty()))
    throw InputError("validate: --cases must be >= 1 (0 only with --timing-case)");
  const OutDirLock lock(fs::absolute(o.outDir));  // OUT is this run's until it returns (work_dir.h)
  return ValidateRun(o, out, err).run();
}

}  // namespace ckpt
