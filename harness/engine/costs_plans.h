// Every policy planned on a profiled model (harness/engine/COSTS.md): the rows `plan --costs --budget` chooses
// from and `report --costs` renders — planned peak, forward evaluations, FLOP overhead, the predicted time
// overhead, and for a policy a per-module placement can express, its predicted saved bytes.
#pragma once
#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "harness/engine/costs_file.h"
#include "harness/engine/placement.h"
#include "harness/engine/plan.h"

namespace ckpt {

struct CostsPlanRow {
  std::string policy;  // canonical
  std::string family;
  Schedule schedule;
  Plan plan;
  std::optional<double> timeOverhead;
  std::optional<std::vector<Segment>> segments;  // set when a placement can express it
  std::string whyNot;                            // else why not
  std::optional<SavedPrediction> saved;
};

// One policy on the profiled chain; throws InputError as makeSchedule does (an infeasible budget).
CostsPlanRow planCostsPolicy(const ChainCosts& c, const ChainCost& cost, const std::string& policy);

// The policies a profiled model is planned under: every default policy, and at a budget optimal:budget= and
// segments:budget= there (when feasible).
std::vector<CostsPlanRow> planCostsPolicies(const ChainCosts& c, const ChainCost& cost, std::optional<int64_t> budget);

// The smallest budget any of them can meet (optimal's least peak, or segments' when lower).
int64_t costsMinBudget(const ChainCost& cost);

// The cheapest row whose planned peak fits: least predicted time overhead, then FLOP overhead, then peak.
// `expressible`: only rows a placement can express. Null when none fits.
const CostsPlanRow* cheapestUnder(const std::vector<CostsPlanRow>& rows, int64_t budget, bool expressible);

// report --costs's input for reports/make_report.py (format ckptcheck-costs-plans, version 1).
nlohmann::json costsPlansJson(const ChainCosts& c, const ChainCost& cost, const std::vector<CostsPlanRow>& rows,
                              std::optional<int64_t> budget);

}  // namespace ckpt
