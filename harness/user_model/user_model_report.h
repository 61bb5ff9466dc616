// What `validate` of a user model found, per seed, and how it is written: OUT/validate.json, OUT/validate.md
// (atomically) and the summary on stdout. The JSON's per-seed figures (saved bytes, step times) also feed the
// report's side-by-side table.
#pragma once
#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "harness/user_model/plan_check.h"
#include "harness/user_model/user_model.h"
#include "harness/user_model/user_model_instruments.h"
#include "harness/user_model/user_model_run.h"
#include "harness/compare.h"
#include "harness/diagnose.h"

namespace ckpt {

struct SeedOutcome {
  enum class Status { kHolds, kFinding, kFault, kBadInput };
  int seed = 1, steps = 1, batchSize = 0;
  bool zeroBatch = false;  // the batch's floating values were zeroed
  Status status = Status::kHolds;
  std::string error;  // a fault, a bad factory, or the checkpointed run's exception
  bool checkpointRaised = false;
  std::vector<Difference> differences;  // of the first differing step
  std::optional<Diagnosis> diagnosis;
  bool roundingAccepted = false;  // every difference within --ulp: reported, not a finding
  std::optional<int64_t> savedPlain, savedCheckpoint;
  std::optional<int64_t> placementBytes;  // what the checkpoint placement implies (user_model_run.h), when known
  std::vector<std::string> recomputed;    // the outermost recomputed modules behind that bound
  bool memoryFinding = false;
  std::optional<PlanOutcome> plan;  // --plan: the placement's prediction against what PyTorch did
  std::string memoryWhy;
  // The memory pass of each run (torch.profiler, user_model_instruments.h): the memory property's figure.
  std::optional<StepMemory> memoryPlain, memoryCheckpoint;
  std::vector<InstrumentCheck> instruments;  // each measuring pass against its compared run
  // JAX: XLA's compiled memory analysis of each run's step and its largest saved residuals (user_model_run.h),
  // reported beside the saved bytes, which are what the memory property holds.
  std::optional<nlohmann::json> compiledPlain, compiledCheckpoint;
  nlohmann::json residualsPlain, residualsCheckpoint;
  double secondsPlain = 0, secondsCheckpoint = 0;  // median step time (step 0, under the hooks, left out)
  std::string dir;                                 // its runs: plain/, checkpoint/ (plain-again/)
  std::optional<int> shrunkFrom;                   // the seed this shrunk finding came from

  bool bitwiseFinding() const { return checkpointRaised || (!differences.empty() && !roundingAccepted); }
  bool planFinding() const { return plan && plan->finding; }
};

struct UserModelReport {
  const UserModelOptions* options = nullptr;
  UserModelSpec spec;
  std::vector<SeedOutcome> seeds;
  std::optional<SeedOutcome> shrunk;
  std::optional<PlacementFile> placement;  // --plan
  int driverRuns = 0;

  int exitCode() const;
  std::string firstError() const;  // the first fault's or bad input's one line
};

nlohmann::json userModelJson(const UserModelReport& r);
std::string userModelSummary(const UserModelReport& r);
std::string userModelMarkdown(const UserModelReport& r);
// OUT/validate.json and OUT/validate.md, each written atomically.
void writeUserModelReport(const UserModelReport& r, const std::string& outDir);

}  // namespace ckpt
