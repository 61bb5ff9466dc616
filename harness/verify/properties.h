// The invariants of ckptcheck (ARCHITECTURE.md), 1 to 6, as records over one Trial: a case trained under a list of
// policies by an engine (the correct one, or a mutant from harness/mutants/) and by the reference trainer. This
// is their one home: properties() (harness/verify/properties.cpp) lists them, a record being its id, its title and
// its check; tests/properties_test.cpp asserts every record with RapidCheck and `ckptcheck verify` searches,
// shrinks, counts and reports by them. Each property checks one invariant and knows nothing of mutants.
//  1 bitwise-equal            every policy's loss, parameter gradients, input gradient, module state and
//                             generator state after every step are bitwise equal to the reference's;
//  2 planned-equals-measured  the executor measures exactly the planner's peak activation bytes, forward
//                             evaluations and FLOPs per phase, every step;
//  3 schedules-valid          every policy emits a schedule, and it passes validateSchedule;
//  4 bounds                   store-all never recomputes; uniform:k=K peaks within (K + ceil(L/K) + 1) M and
//                             recursive within (ceil(log2 L) + 2) M, M the largest one-block store-all peak;
//                             revolve:slots=C runs numforw(L, C) + L forwards; optimal stays within its budget
//                             and, where its DP grid is exact, never recomputes more FLOPs than any other policy
//                             of the trial (or the one Trial::optimalRival picks) at that policy's own peak and
//                             op-level masks; segments:budget=B stays within B and recomputes no more than any
//                             uniform:k=K (K <= 256) that fits B.
//  5 optimal-plan-consistent  the optimal DP's own prediction for the schedule it emits (peak bytes, recompute
//                             FLOPs) agrees with the planner's walk of that schedule, which stays within the
//                             budget: for every optimal run of the trial, and for a long homogeneous chain
//                             (Trial::longLayers blocks, plan only) where the DP works on a coarse grid;
//  6 placement-round-trip     every run whose schedule a per-module placement expresses (placement.h: store-all,
//                             uniform, segments, which always must, and any other that is one) reads back as segments
//                             whose schedule reads back as the same segments and plans the run's own peak, forward
//                             evaluations and FLOPs (what placement.json promises for the policy), and the saved
//                             bytes COSTS.md predicts for the placement on the case's chain as chain costs
//                             (chainCostsOf) are the planner's live bytes when the forward pass ends.
#pragma once
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "cases/case_spec.h"
#include "harness/compare.h"
#include "harness/diagnose.h"
#include "harness/engine/chain_cost.h"
#include "harness/engine/device_steps.h"
#include "harness/engine/engine_variant.h"
#include "harness/engine/plan.h"
#include "harness/engine/schedule.h"
#include "harness/policies/optimal.h"

namespace ckpt {

// A property is the address of its record (as a block kind is, cases/block_kind.h); its number is its place in
// properties(), from 1.
struct PropertyDef;
using Property = const PropertyDef*;

// What one step of a run measured.
struct StepCost {
  int64_t peakActivationBytes = 0;
  int64_t forwardEvals = 0;
  FlopCounts flops;
};

// One policy of a trial: its schedule and plan, and what the engine did with it.
struct PolicyRun {
  std::string policy;         // as given
  std::string scheduleError;  // the policy emitted no schedule, or validateSchedule refused it
  Schedule schedule;          // when scheduleError is empty
  Plan plan;
  bool ran = false;         // the engine ran every step
  std::string engineError;  // the engine threw mid-step
  Comparison comparison;    // against the reference, every step
  // When the comparison differs: its class (harness/diagnose.h), computed from both runs' tensors by
  // diagnoseSteps while they exist (the trial keeps no tensors).
  std::optional<Diagnosis> diagnosis;
  std::vector<StepCost> measured;  // per step
};

// The optimal DP that property 5 holds against the planner: optimalPlan (harness/policies/optimal.h), or a broken
// one a test gives (tests/narrow_mutants_test.cpp: a planner bug is searched for and shrunk like an engine's).
using OptimalPlanner = std::function<OptimalPlan(const ChainCost& c, int64_t budgetBytes, const OptimalOptions& o)>;

struct Trial {
  CaseSpec spec;
  ChainCost cost;
  std::vector<PolicyRun> runs;
  // Property 4 compares optimal with every other run (-1), or, to keep the DP's cost per case small in long
  // searches, with one of them: the (optimalRival mod n)-th of the n runs it applies to.
  int optimalRival = -1;
  // Property 5: a homogeneous chain of this many blocks like the case's first (0: none) that optimal plans only,
  // at longBudget permille of [its smallest feasible budget, store-all's peak].
  int longLayers = 0;
  int longBudget = 0;
  // Property 5's DP; empty: optimalPlan.
  OptimalPlanner planOptimal;
};

// Trains the case with the reference and, from the same initial state, under every policy with `engine`. On a
// device (device_steps.h) the reference is the device's own store-all run with the correct engine, and the
// policies run with `engine` there too (the same executor and hooks).
Trial runTrial(const CaseSpec& spec, const std::vector<std::string>& policies, const EngineVariant& engine,
               Device device = Device::kCpu);

struct Violation {
  Property property = nullptr;
  std::string policy;                    // the policy it was seen under
  std::string message;                   // one line
  std::optional<Difference> difference;  // property 1: the first differing tensor
  std::optional<Diagnosis> diagnosis;    // property 1: the class of the policy's difference (not for an engine
                                         // that failed mid-step: no tensors to judge)
};

struct PropertyDef {
  const char* id;     // "bitwise-equal": verify's JSON, JUnit and finding file names
  const char* title;  // what holds, one line: "every policy is bitwise equal to the reference ..."
  // The trial's first violation of the property, or none; checkProperty fills in Violation::property.
  std::optional<Violation> (*check)(const Trial& t);
};

// Every property, in number order: a new property is its check and one line in properties.cpp. verify's search,
// counts, text, JSON and JUnit output and tests/properties_test.cpp take them from here.
const std::vector<PropertyDef>& properties();
int propertyNumber(Property p);              // 1 for the first
Property findProperty(std::string_view id);  // null when no property has that id
// p's check on t, the violation's property set to p. A property that throws while checking (a schedule that cannot
// be planned, a DP that refuses a feasible budget) reports that as its violation: a broken policy is a finding to
// shrink, never an aborted run.
std::optional<Violation> checkProperty(Property p, const Trial& t);

}  // namespace ckpt
