// A placement (harness/engine/COSTS.md): the chain cut into segments, each stored (run once with its tape) or
// recomputed (run once without a tape, then once more with it in the backward pass, from its input) — what
// per-module torch.utils.checkpoint expresses. Which schedules have that form, the schedule of a placement, and
// what a placement is predicted to save and cost on a profiled model.
#pragma once
#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "harness/engine/chain_cost.h"
#include "harness/engine/costs_file.h"
#include "harness/engine/schedule.h"

namespace ckpt {

struct Segment {
  int first = 0, last = 0;  // blocks first..last, inclusive
  bool recompute = false;
  bool operator==(const Segment&) const = default;
};

// The segments of a schedule of that form; throws InputError naming the first block that breaks it ("block 3 is
// run 3 times (a nested recompute: no per-module checkpoint runs a block more than twice)"). Adjacent stored
// blocks are one segment.
std::vector<Segment> placementOf(const Schedule& s);
// nullopt and the reason instead of throwing.
std::optional<std::vector<Segment>> placementOrWhy(const Schedule& s, std::string* why);

// The schedule of a placement over `layers` blocks (the forward of every segment in order, the loss, each
// segment's backward from the last, a recomputed one recomputed whole first). Throws std::invalid_argument
// unless the segments cover 0..layers-1 in order.
Schedule placementSchedule(const std::vector<Segment>& segs, int layers, const std::string& policy);

// Forward runs of each block under a schedule (first and recomputed).
std::vector<int64_t> forwardCalls(const Schedule& s);

// COSTS.md "Saved bytes of a placement": the storages the checkpointed run saves in the forward pass, each once,
// attributed to the first party that saves it (before, block 0 .. L-1, after).
struct SavedPrediction {
  int64_t total = 0, before = 0, after = 0;
  std::vector<int64_t> byBlock;
};
SavedPrediction predictSaved(const ChainCosts& c, const std::vector<Segment>& segs);

// The time the schedule's recomputes are predicted to add, over the plain step: each block's recompute_seconds
// (what recomputing it added to the step, measured per block by the profile on the model fully recomputed), or
// its recompute_end_seconds where the next block is stored (measured with every other block recomputed); older
// files: its forward seconds plus checkpoint_seconds. At least 0, times its extra forward runs, over step_seconds.
// nullopt when a tape drops op-level contexts (their time was not measured per op) or the step time is zero.
std::optional<double> predictedTimeOverhead(const ChainCosts& c, const Schedule& s);

// placement.json (COSTS.md).
inline constexpr const char* kPlacementFormat = "ckptcheck-placement";
inline constexpr int kPlacementVersion = 1;
nlohmann::json placementJson(const ChainCosts& c, const ChainCost& cost, const Schedule& s,
                             const std::vector<Segment>& segs);

}  // namespace ckpt
