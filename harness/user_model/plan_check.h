// `validate --adapter torch:module=... --plan placement.json` (harness/engine/COSTS.md): the placement the
// planner wrote for a profiled model, applied by the torch adapter, checked against what PyTorch then did. The
// saved activation bytes (saved-tensor hooks, each storage once) must equal the planner's prediction to the byte,
// per party (the part before the chain, each block, the part after); each block must run as often as the plan
// says; the measured peak must not exceed the planned one by more than kPeakTolerance (below); the measured
// step-time overhead is reported next to the predicted one.
#pragma once
#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace ckpt {

struct PlacementFile {
  std::string path, policy, model;
  int64_t batchSize = 0;
  std::vector<std::string> blocks;
  int64_t savedBytes = 0, savedBefore = 0, savedAfter = 0;
  std::vector<int64_t> savedByBlock, forwardCalls;
  int64_t peakBytes = 0;  // predicted.peak_activation_bytes: the planner's peak of the chain
  std::optional<double> timeOverhead;
};

// The peak check (COSTS.md, "The peak of a placement"). Predicted: the planner's peak of the chain plus what the
// part before the chain saves (the same under every placement, outside the planner's chain). Measured: the
// memory pass's peak_activation_bytes (torch.profiler: the step's peak of every tensor but parameters, their
// gradients and optimizer state, op workspace left out). The planner charges a block's tape whole and knows
// nothing of the gradients inside a block while its backward runs, so the measured peak sits above the
// prediction by up to that working set: +15.5% on GPT-2's smallest placement, within 5% either way on ResNet-18
// and the MLP. A measured peak above the prediction by more than this fraction is a finding: the placement holds memory
// the plan does not (a tensor kept past its block, recomputes that overlap). One below it is reported only.
constexpr double kPeakTolerance = 0.25;

// Throws InputError of one line naming the file and the field: every field COSTS.md documents is checked, within
// the costs format's bounds (costs_file.h), and the predicted figures against each other (forward_calls against
// the segments, saved_bytes against its parts).
PlacementFile loadPlacementFile(const std::string& path);
PlacementFile parsePlacementFile(const nlohmann::json& j, const std::string& path);

struct PlanOutcome {
  int64_t predictedBytes = 0, measuredBytes = 0;
  std::optional<double> predictedTime, measuredTime;
  int timedPairs = 0;  // side-by-side pairs behind measuredTime (0: the two runs' own step times)
  std::optional<std::pair<double, double>> measuredTimeMiddleHalf;  // the pairs' 25th and 75th percentiles
  int64_t predictedPeak = 0;            // the planner's peak plus the part before the chain's saved bytes
  std::optional<int64_t> measuredPeak;  // none: the memory pass changed its run or could not categorise
  bool finding = false;
  std::string why;  // the first divergence: bytes at a block, or a block's forward runs
};

// `measured` is the driver's "plan" record (user_model.py). The measured overhead is the median, over its
// side-by-side timing pairs, of checkpointed / plain - 1, with the middle half of those ratios (25th to 75th
// percentile, common/quantile.h), so a gap to the prediction can be read against the pairs' own spread; without
// them, secondsPlan / secondsPlain - 1 (the two runs' own step times, each in its own process). `measuredPeak`: the
// checkpointed run's memory pass's peak_activation_bytes (none when not measured: the peak is then not checked, and the
// report says so). Throws std::runtime_error for a record that is not the driver's.
PlanOutcome checkPlan(const PlacementFile& p, const nlohmann::json& measured, double secondsPlain, double secondsPlan,
                      std::optional<int64_t> measuredPeak = std::nullopt);

}  // namespace ckpt
