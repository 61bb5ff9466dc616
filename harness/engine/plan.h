// The planner: walks a schedule over a ChainCost with the block simulator (no tensors) and predicts exactly what
// the executor measures. The validator: rejects a schedule that cannot run, naming the instruction and why.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "harness/engine/chain_cost.h"
#include "harness/engine/schedule.h"
#include "reference/meter.h"

namespace ckpt {

struct Plan {
  std::vector<int64_t> liveAfter;  // live activation bytes after each instruction
  int64_t peakActivationBytes = 0; // high-water mark, transients inside instructions included
  int64_t forwardEvals = 0;        // block forward runs, initial + recompute
  FlopCounts flops;                // forward, recompute, backward (the loss counts as forward/backward)
  double flopOverhead() const;     // recompute / (forward + backward)
};

// Throws InputError("schedule instruction 17 (backward 3): block 3 has no tape") when the schedule cannot run.
void validateSchedule(const Schedule& s, const ChainCost& c);
Plan planSchedule(const Schedule& s, const ChainCost& c);

}  // namespace ckpt
