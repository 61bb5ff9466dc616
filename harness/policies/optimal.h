// The optimal policy's knobs and its answer in full, for tests, benchmarks and makeSchedule's composition with
// op-level masks (optimal+selective: the DP must know the masks the tapes will carry). policy.h has the plain
// optimalSchedule(chain, budget) and optimalMinBudget(chain).
#pragma once
#include <cstdint>
#include <vector>

#include "harness/engine/chain_cost.h"
#include "harness/engine/schedule.h"

namespace ckpt {

struct OptimalOptions {
  // Memory levels of the DP grid (Rotor's default). Every level is a whole number of the gcd of the model's byte
  // counts, so budget / gcd levels would lose nothing: the exact grid.
  int levels = 500;
  // true: the finest grid the DP can tabulate in a few seconds (the exact one when it fits), never coarser than
  // `levels`; false: `levels` levels exactly (for measuring the DP at a fixed size).
  bool refine = true;
  std::vector<KeepMask> keep;  // the op-level masks every tape will carry; empty = whole tapes
};

struct OptimalPlan {
  Schedule schedule;
  int64_t peakBytes = 0;         // the model's peak for the schedule (planSchedule's, or above it: see optimal.cpp)
  int64_t forwardFlops = 0;      // every block forward the schedule runs, first and recomputed
  int64_t recomputeFlops = 0;    // forwardFlops minus one forward of every block
  int64_t unitBytes = 0;         // the grid's level size
  int64_t levels = 0;            // levels tabulated (budget / unitBytes)
  bool exactGrid = false;        // unitBytes divides every size of the model: no rounding
  bool minPeakFallback = false;  // the grid found nothing (rounding) and the least-peak schedule was used
};

// Throws InputError("policy 'optimal:budget=N': infeasible; the smallest feasible budget is M bytes").
OptimalPlan optimalPlan(const ChainCost& c, int64_t budgetBytes, const OptimalOptions& o = {});
// The least peak any schedule of the DP's family reaches (every finer schedule peaks higher).
int64_t optimalMinBudget(const ChainCost& c, const std::vector<KeepMask>& keep);

}  // namespace ckpt
