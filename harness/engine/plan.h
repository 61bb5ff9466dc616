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

// One pass of the schedule: a step's, or with micro-batches (cases/micro_batches.h) one micro-batch's, which
// every pass of the step repeats. A step's peak is one pass's (nothing stays live from one to the next); its
// forward evaluations and FLOPs are `passes` times one pass's (step*()), which is what the executor measures.
struct Plan {
  std::vector<int64_t> liveAfter;   // live activation bytes after each instruction
  int64_t peakActivationBytes = 0;  // high-water mark, transients inside instructions included
  int64_t forwardEvals = 0;         // block forward runs, initial + recompute
  FlopCounts flops;                 // forward, recompute, backward (the loss counts as forward/backward)
  int64_t passes = 1;               // micro-batches per step
  double flopOverhead() const;      // recompute / (forward + backward)
  int64_t stepForwardEvals() const { return forwardEvals * passes; }
  FlopCounts stepFlops() const { return {flops.forward * passes, flops.recompute * passes, flops.backward * passes}; }
};

// Throws InputError("schedule instruction 17 (backward 3): block 3 has no tape") when the schedule cannot run.
void validateSchedule(const Schedule& s, const ChainCost& c);
Plan planSchedule(const Schedule& s, const ChainCost& c);

}  // namespace ckpt
