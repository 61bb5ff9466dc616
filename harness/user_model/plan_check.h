// `validate --adapter torch:module=... --plan placement.json` (harness/engine/COSTS.md): the placement the
// planner wrote for a profiled model, applied by the torch adapter, checked against what PyTorch then did. The
// saved activation bytes (saved-tensor hooks, each storage once) must equal the planner's prediction to the byte,
// per party (the part before the chain, each block, the part after); each block must run as often as the plan
// says; the measured step-time overhead is reported next to the predicted one.
#pragma once
#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

namespace ckpt {

struct PlacementFile {
  std::string path, policy, model;
  int64_t batchSize = 0;
  std::vector<std::string> blocks;
  int64_t savedBytes = 0, savedBefore = 0, savedAfter = 0;
  std::vector<int64_t> savedByBlock, forwardCalls;
  std::optional<double> timeOverhead;
};

// Throws InputError of one line naming the file and the field: every field COSTS.md documents is checked, within
// the costs format's bounds (costs_file.h), and the predicted figures against each other (forward_calls against
// the segments, saved_bytes against its parts).
PlacementFile loadPlacementFile(const std::string& path);
PlacementFile parsePlacementFile(const nlohmann::json& j, const std::string& path);

struct PlanOutcome {
  int64_t predictedBytes = 0, measuredBytes = 0;
  std::optional<double> predictedTime, measuredTime;
  int timedPairs = 0;  // side-by-side pairs behind measuredTime (0: the two runs' own step times)
  bool finding = false;
  std::string why;  // the first divergence: bytes at a block, or a block's forward runs
};

// `measured` is the driver's "plan" record (user_model.py). The measured overhead is the median, over its
// side-by-side timing pairs, of checkpointed / plain - 1; without them, secondsPlan / secondsPlain - 1 (the two
// runs' own step times, each in its own process).
// Throws std::runtime_error for a record that is not the driver's.
PlanOutcome checkPlan(const PlacementFile& p, const nlohmann::json& measured, double secondsPlain, double secondsPlan);

}  // namespace ckpt
