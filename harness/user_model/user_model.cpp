#include "harness/user_model/user_model.h"

#include <algorithm>
#include <array>
#include <filesystem>
#include <optional>
#include <ostream>
#include <sstream>

#include "common/input_error.h"
#include "harness/validate/case_dir.h"
#include "harness/user_model/user_model_instruments.h"
#include "harness/user_model/user_model_jax.h"
#include "harness/user_model/user_model_report.h"
#include "harness/user_model/user_model_run.h"
#include "harness/validate/work_dir.h"
#include "harness/exit_codes.h"
#include "harness/text_format.h"

namespace ckpt {
namespace fs = std::filesystem;

namespace {

double median(std::vector<double> v) {
  if (v.size() > 1) v.erase(v.begin());  // step 0 warms the allocator up (and compiles): not a fair time
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

class Checker {
 public:
  Checker(const UserModelSpec& spec, const UserModelOptions& o, const PlacementFile* plan)
      : spec_(spec), o_(o), plan_(plan) {}

  // Plain and checkpointed runs of one seed, compared; a difference is confirmed against a second plain run.
  // `measure`: the measuring passes too (user_model_instruments.h); shrink trials need only the masks.
  SeedOutcome check(int seed, int steps, int batch, bool zeroBatch, const std::string& dir, bool measure = true) {
    SeedOutcome r;
    r.zeroBatch = zeroBatch;
    r.seed = seed;
    r.steps = steps;
    r.batchSize = batch;
    r.dir = dir;
    zero_ = zeroBatch;
    const RunDump plain = run(seed, steps, batch, "plain", dir + "/plain");
    r.batchSize = plain.batchSize;
    r.zeroBatch = zeroBatch && plain.zeroedTensors > 0;  // a batch of ids only has no values to zero
    if (!usable(plain, "plain", r) || !finite(plain, r)) return r;
    const RunDump ckpt = run(seed, steps, batch, "checkpoint", dir + "/checkpoint");
    if (ckpt.status == RunDump::Status::kRaised && ckpt.phase == "checkpoint transform") {
      // The transform itself failed: nothing was trained with checkpointing, so there is nothing to judge.
      r.status = SeedOutcome::Status::kFault;
      r.error = "the checkpoint transform raised: " + ckpt.error;
      return r;
    }
    if (ckpt.status == RunDump::Status::kRaised) {
      // The plain run of the same model trained: the checkpointing setup itself breaks training.
      r.status = SeedOutcome::Status::kFinding;
      r.checkpointRaised = true;
      r.error = "the checkpointed run raised (" + ckpt.phase + ") where the plain run did not: " + ckpt.error;
      return r;
    }
    if (!usable(ckpt, "checkpointed", r)) return r;
    r.secondsPlain = median(plain.stepSeconds);
    r.secondsCheckpoint = median(ckpt.stepSeconds);
    // The compared runs carry no instrument: every figure comes from a measuring pass that changed nothing.
    const RunDump *savedPlain = &plain, *savedCkpt = &ckpt;  // a driver that measures in its compared runs (JAX)
    if (measure && inPasses()) {
      MeasuringPasses m = runMeasuringPasses(passRunner(seed, steps, r.batchSize), plain, ckpt, dir);
      r.instruments = m.checks;
      if (!m.fault.empty()) {
        r.status = SeedOutcome::Status::kFault;
        r.error = m.fault;
        return r;
      }
      measured_ = std::move(m.saved);
      savedPlain = measured_[0] ? &*measured_[0] : nullptr;
      savedCkpt = measured_[1] ? &*measured_[1] : nullptr;
      r.memoryPlain = m.memory[0];
      r.memoryCheckpoint = m.memory[1];
    }
    if (savedPlain && savedCkpt) {
      r.savedPlain = savedPlain->savedBytes;
      r.savedCheckpoint = savedCkpt->savedBytes;
    }
    r.compiledPlain = plain.compiledMemory;
    r.compiledCheckpoint = ckpt.compiledMemory;
    r.residualsPlain = plain.savedResiduals;
    r.residualsCheckpoint = ckpt.savedResiduals;
    if (savedPlain && savedCkpt)
      if (const auto bound = placementBound(*savedPlain, *savedCkpt)) {
        r.placementBytes = bound->bytes;
        r.recomputed = bound->recomputed;
      }
    if (!compare(plain, ckpt, dir, r)) return r;
    // With --plan the placement's exact prediction is the memory property (a store-all placement saves nothing
    // on purpose); without, the saving and the placement bound.
    if (!plan_) checkMemory(r);
    if (!checkPlacement(plain, savedCkpt, r)) return r;
    r.status = r.bitwiseFinding() || r.memoryFinding || r.planFinding() ? SeedOutcome::Status::kFinding
                                                                        : SeedOutcome::Status::kHolds;
    return r;
  }

  int runs() const { return runs_; }

 private:
  // The torch driver measures in passes of their own; the JAX driver reports what it reads off the compiled step.
  bool inPasses() const { return spec_.framework == "torch"; }

  PassRunner passRunner(int seed, int steps, int batch) {
    return [this, seed, steps, batch](const std::string& mode, const std::string& dir, const std::string& inst) {
      return run(seed, steps, batch, mode, dir, false, inst);
    };
  }

  RunDump run(int seed, int steps, int batch, const std::string& mode, const std::string& dir,
              bool randomnessOff = false, const std::string& instruments = "") {
    ++runs_;
    DriverRequest q;
    q.randomnessOff = randomnessOff;
    q.seed = seed;
    q.steps = steps;
    q.batchSize = batch;
    q.zeroBatch = zero_;
    q.mode = mode;
    q.dir = dir;
    q.timeoutSeconds = o_.timeoutSeconds;
    if (plan_) q.plan = plan_->path;
    q.instruments = instruments;
    return runDriver(spec_, q);
  }

  // A plain run whose loss, gradients or parameters are not finite cannot be judged (harness/compare.h): a fault,
  // never "holds" (two NaN runs are equal bit for bit).
  static bool finite(const RunDump& plain, SeedOutcome& r) {
    try {
      const auto why = firstNonFinite(plain);
      if (!why) return true;
      r.error = "the plain run is not finite: " + *why + "; " + kNotJudged;
    } catch (const std::exception& e) {
      r.error = std::string("cannot read the plain run: ") + e.what();
    }
    r.status = SeedOutcome::Status::kFault;
    return false;
  }

  static bool usable(const RunDump& d, const std::string& which, SeedOutcome& r) {
    switch (d.status) {
      case RunDump::Status::kOk:
        return true;
      case RunDump::Status::kBadFactory:
        r.status = SeedOutcome::Status::kBadInput;
        r.error = d.error;
        return false;
      case RunDump::Status::kRaised:
        r.status = SeedOutcome::Status::kFault;
        r.error = "the " + which + " run raised (" + d.phase + "): " + d.error;
        return false;
      case RunDump::Status::kCrashed:
        r.status = SeedOutcome::Status::kFault;
        r.error = d.error;
        return false;
    }
    return false;
  }

  // False when the outcome is decided (a fault): the plain run does not repeat itself, or a dump is unreadable.
  bool compare(const RunDump& plain, const RunDump& ckpt, const std::string& dir, SeedOutcome& r) {
    try {
      DumpComparison c = compareDumps(plain, ckpt);
      if (c.differences.empty()) return true;
      const RunDump again = run(r.seed, r.steps, r.batchSize, "plain", dir + "/plain-again");
      if (!usable(again, "second plain", r)) return false;
      const DumpComparison self = compareDumps(plain, again);
      if (!self.differences.empty()) {
        r.status = SeedOutcome::Status::kFault;
        r.error = "the model is not deterministic: two plain runs of seed " + std::to_string(r.seed) + " differ (" +
                  toText(self.differences.front()) + "); no finding can be trusted";
        return false;
      }
      r.differences = std::move(c.differences);
      if (inPasses())  // the dropout masks, from the masks pass of each mode (user_model_instruments.h)
        for (auto& e : maskEvidence(passRunner(r.seed, r.steps, r.batchSize), plain, ckpt, dir, r.instruments))
          c.evidence.push_back(std::move(e));
      r.diagnosis = diagnose(c.evidence, std::max(o_.ulp, kRoundingLevelUlp));
      if (spec_.framework == "jax") judgeJax(c, dir, r);
      r.roundingAccepted = o_.ulp > 0 && r.diagnosis->cls == FindingClass::kRoundingLevel &&
                           r.diagnosis->worstScaledUlp <= static_cast<double>(o_.ulp);
      return true;
    } catch (const std::exception& e) {
      r.status = SeedOutcome::Status::kFault;
      r.error = std::string("cannot compare the runs: ") + e.what();
      return false;
    }
  }

  // JAX (user_model_jax.h): a semantic difference whose gradients agree within the tolerance is rounding-level
  // (the optimizer amplified it into the parameters); one that vanishes with every dropout off came from the random
  // draws (rng-desync), as validate's dropout-off re-run tells it for cases (diagnose.h).
  void judgeJax(const DumpComparison& c, const std::string& dir, SeedOutcome& r) {
    if (r.diagnosis->cls != FindingClass::kSemantic) return;
    if (auto d = gradientsWithinScale(c.evidence, std::max(o_.ulp, kRoundingLevelUlp))) {
      r.diagnosis = *d;
      return;
    }
    const RunDump plain = run(r.seed, r.steps, r.batchSize, "plain", dir + "/plain-randomness-off", true);
    const RunDump ckpt = run(r.seed, r.steps, r.batchSize, "checkpoint", dir + "/checkpoint-randomness-off", true);
    if (plain.status != RunDump::Status::kOk || ckpt.status != RunDump::Status::kOk) return;
    const DumpComparison off = compareDumps(plain, ckpt);
    if (off.differences.empty() ||
        diagnose(off.evidence, std::max(o_.ulp, kRoundingLevelUlp)).cls == FindingClass::kRoundingLevel)
      r.diagnosis = dropoutOffDiagnosis();
  }

  // The profiler's activation bytes (memory the forward leaves for the backward, user_model_instruments.h) when
  // measured, else the saved-tensor bytes; the placement bound is in saved-tensor bytes, as its evidence is.
  void checkMemory(SeedOutcome& r) const {
    const bool profiled = r.memoryPlain && r.memoryCheckpoint;
    const std::optional<int64_t> p = profiled ? r.memoryPlain->activationBytes : r.savedPlain;
    const std::optional<int64_t> c = profiled ? r.memoryCheckpoint->activationBytes : r.savedCheckpoint;
    if (!p || !c || *p <= 0) return;
    const std::string what = profiled ? "activation memory (bytes the forward leaves for the backward, "
                                        "torch.profiler)"
                                      : "saved activations";
    const std::string figures = " (plain " + std::to_string(*p) + " bytes, checkpointed " + std::to_string(*c) + ")";
    const double plain = static_cast<double>(*p), ckpt = static_cast<double>(*c);
    if (ckpt >= plain) {
      r.memoryFinding = true;
      r.memoryWhy = "checkpointing had no effect on " + what + figures;
    } else if (r.placementBytes && r.savedCheckpoint && *r.savedCheckpoint > *r.placementBytes) {
      r.memoryFinding = true;
      r.memoryWhy = "the checkpointed run saved " + std::to_string(*r.savedCheckpoint) +
                    " bytes, more than its checkpoint placement implies: " + std::to_string(*r.placementBytes) +
                    " (what the plain run saves outside the " + std::to_string(r.recomputed.size()) +
                    " recomputed module(s), plus their inputs)";
    } else if (ckpt > (1.0 - o_.minSaving) * plain) {
      std::ostringstream s;
      s.precision(3);
      s << "checkpointing saved only " << 100.0 * (1.0 - ckpt / plain) << "% of the " << what << figures
        << "; --min-saving requires " << 100.0 * o_.minSaving << "%";
      r.memoryWhy = s.str();
      r.memoryFinding = true;
    }
  }

  // --plan: the prediction is for the batch it was profiled at, so a shrink trial at another batch is not held to it.
  // `measured`: the checkpointed run's saved-bytes pass, which holds the plan record (null: that pass changed
  // the run, so its record cannot be trusted).
  bool checkPlacement(const RunDump& plain, const RunDump* measured, SeedOutcome& r) const {
    if (!plan_ || plain.batchSize != plan_->batchSize) return true;
    if (!measured || !measured->planRecord) {
      r.status = SeedOutcome::Status::kFault;
      r.error = measured ? "the checkpointed run applied the placement but wrote no plan record"
                         : "the placement's saved-bytes pass changed the checkpointed run: the plan is not measured";
      return false;
    }
    try {
      const std::optional<int64_t> peak = r.memoryCheckpoint ? r.memoryCheckpoint->peakActivationBytes : std::nullopt;
      r.plan = checkPlan(*plan_, *measured->planRecord, r.secondsPlain, r.secondsCheckpoint, peak);
    } catch (const std::exception& e) {
      r.status = SeedOutcome::Status::kFault;
      r.error = std::string("unreadable plan record: ") + e.what();
      return false;
    }
    return true;
  }

  const UserModelSpec& spec_;
  const UserModelOptions& o_;
  const PlacementFile* plan_;
  int runs_ = 0;
  std::array<std::optional<RunDump>, 2> measured_;  // the check in progress: its saved-bytes passes
  bool zero_ = false;                               // the batch values of the check in progress
};

// Shrinks a bitwise finding: the smallest batch (halving), its values (floating tensors zeroed), the steps up
// to the first difference, then a smaller seed, each kept only when it fails the same way (same class, same
// first differing tensor, not reduced to a sign of zero).
SeedOutcome shrink(Checker& checker, SeedOutcome f, const UserModelOptions& o, const std::string& root) {
  const auto firstOf = [](const SeedOutcome& s) {
    return s.differences.empty() ? std::string("raised") : s.differences.front().tensor;
  };
  const auto classOf = [](const SeedOutcome& s) { return s.diagnosis ? s.diagnosis->cls : FindingClass::kSemantic; };
  const SeedOutcome original = f;
  int trial = 0;
  // A difference that collapses to the sign of a zero (zeroed inputs make -0 vs +0 gradients) says less than the
  // original: not the same way.
  const auto signOnly = [](const SeedOutcome& s) {
    return !s.differences.empty() && s.differences.front().shape.empty() && s.differences.front().maxUlpDistance == 0;
  };
  auto same = [&](const SeedOutcome& c) {
    return c.bitwiseFinding() && c.checkpointRaised == original.checkpointRaised && firstOf(c) == firstOf(original) &&
           classOf(c) == classOf(original) && signOnly(c) == signOnly(original);
  };
  auto attempt = [&](int seed, int steps, int batch, bool zero) {
    SeedOutcome c = checker.check(seed, steps, batch, zero, root + "/shrink-" + std::to_string(++trial), false);
    if (same(c)) f = c;
    return same(c);
  };
  for (int b = f.batchSize / 2; b >= 1 && attempt(f.seed, f.steps, b, f.zeroBatch); b /= 2) {
  }
  if (!f.zeroBatch) attempt(f.seed, f.steps, f.batchSize, true);
  if (!f.differences.empty() && f.differences.front().step + 1 < f.steps)
    attempt(f.seed, f.differences.front().step + 1, f.batchSize, f.zeroBatch);
  for (int s = o.firstSeed; s < f.seed && s < o.firstSeed + 3; ++s)
    if (attempt(s, f.steps, f.batchSize, f.zeroBatch)) break;
  f.shrunkFrom = original.seed;
  return f;
}

}  // namespace

int runUserModelValidate(const UserModelOptions& o, std::ostream& out, std::ostream& err) {
  UserModelReport rep;
  UserModelOptions opts = o;  // --plan sets the batch
  rep.options = &opts;
  std::optional<OutDirLock> lock;
  try {
    rep.spec = parseUserModelSpec(o.adapter, o.options);
    if (rep.spec.framework == "jax" && !o.planPath.empty())
      throw InputError("--plan: placements apply to torch models only (a JAX model's remat is its factory's)");
    if (rep.spec.framework == "jax" && !o.ulpGiven) opts.ulp = kJaxDefaultUlp;
    if (!o.planPath.empty()) {
      rep.placement = loadPlacementFile(o.planPath);
      if (o.batchSize > 0 && o.batchSize != rep.placement->batchSize)
        throw InputError("--batch-size " + std::to_string(o.batchSize) + ": the placement '" + o.planPath +
                         "' was planned at batch " + std::to_string(rep.placement->batchSize));
      opts.batchSize = static_cast<int>(rep.placement->batchSize);
    }
    lock.emplace(o.outDir);  // OUT is this run's until it returns (harness/validate/work_dir.h)
  } catch (const std::exception& e) {
    err << "ckptcheck: " << escapeControl(e.what()) << "\n";
    return kExitBadInput;
  }
  Checker checker(rep.spec, opts, rep.placement ? &*rep.placement : nullptr);
  const std::string work = (fs::path(o.outDir) / "work").string();
  for (int i = 0; i < o.seeds; ++i) {
    const int seed = o.firstSeed + i;
    rep.seeds.push_back(
        checker.check(seed, o.steps, opts.batchSize, o.zeroBatch, work + "/seed" + std::to_string(seed)));
    if (rep.seeds.back().status == SeedOutcome::Status::kBadInput) break;  // every seed would say the same
  }
  for (const auto& s : rep.seeds) {
    if (s.bitwiseFinding() && o.shrink) {
      rep.shrunk = shrink(checker, s, o, work);
      break;
    }
  }
  rep.driverRuns = checker.runs();
  const int code = rep.exitCode();
  try {
    writeUserModelReport(rep, o.outDir);
  } catch (const std::exception& e) {
    err << "ckptcheck: " << escapeControl(e.what()) << "\n";
    return kExitInfra;
  }
  if (code == kExitBadInput) {  // one line and nothing else, as for every bad input
    err << "ckptcheck: " << escapeControl(rep.firstError()) << "\n";
    return code;
  }
  if (o.json) out << userModelJson(rep).dump(2) << "\n";
  else out << userModelSummary(rep);
  if (code == kExitInfra) err << "ckptcheck: " << escapeControl(rep.firstError()) << "\n";
  return code;
}

}  // namespace ckpt
