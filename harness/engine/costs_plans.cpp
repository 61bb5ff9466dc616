#include "harness/engine/costs_plans.h"

#include <algorithm>
#include <tuple>

#include "common/input_error.h"
#include "harness/engine/policy.h"
#include "harness/engine/policy_rule.h"

namespace ckpt {

CostsPlanRow planCostsPolicy(const ChainCosts& c, const ChainCost& cost, const std::string& policy) {
  const PolicySpec spec = parsePolicy(policy);
  CostsPlanRow r;
  r.schedule = makeSchedule(spec, cost);
  r.policy = r.schedule.policy.empty() ? spec.text : r.schedule.policy;
  r.family = policyFamily(spec);
  r.plan = planSchedule(r.schedule, cost);
  r.timeOverhead = predictedTimeOverhead(c, r.schedule);
  r.segments = placementOrWhy(r.schedule, &r.whyNot);
  if (r.segments) r.saved = predictSaved(c, *r.segments);
  return r;
}

std::vector<CostsPlanRow> planCostsPolicies(const ChainCosts& c, const ChainCost& cost, std::optional<int64_t> budget) {
  std::vector<std::string> policies = defaultPolicies(cost);
  if (budget) {
    policies.push_back("optimal:budget=" + std::to_string(*budget));
    policies.push_back("segments:budget=" + std::to_string(*budget));
  }
  std::vector<CostsPlanRow> rows;
  for (const std::string& p : policies) {
    try {
      rows.push_back(planCostsPolicy(c, cost, p));
    } catch (const InputError&) {
      if (!budget) throw;  // only the budget's own policies may be infeasible
    }
  }
  return rows;
}

int64_t costsMinBudget(const ChainCost& cost) { return std::min(optimalMinBudget(cost), segmentsMinBudget(cost)); }

const CostsPlanRow* cheapestUnder(const std::vector<CostsPlanRow>& rows, int64_t budget, bool expressible) {
  const CostsPlanRow* best = nullptr;
  auto key = [](const CostsPlanRow& r) {
    return std::make_tuple(r.timeOverhead.value_or(r.plan.flopOverhead()), r.plan.flopOverhead(),
                           r.plan.peakActivationBytes);
  };
  for (const CostsPlanRow& r : rows) {
    if (r.plan.peakActivationBytes > budget || (expressible && !r.segments)) continue;
    if (!best || key(r) < key(*best)) best = &r;
  }
  return best;
}

namespace {

nlohmann::json nullable(const std::optional<double>& v) { return v ? nlohmann::json(*v) : nlohmann::json(nullptr); }

// optimal:budget= at budgets spread from its least feasible one to store-all's peak: the frontier of the model.
nlohmann::json frontierJson(const ChainCosts& c, const ChainCost& cost, int64_t least, int64_t full) {
  nlohmann::json f = nlohmann::json::array();
  constexpr int kPoints = 16;
  for (int k = 0; k <= kPoints; ++k) {
    const int64_t budget = least + (full - least) * k / kPoints;
    Schedule s;
    try {
      s = optimalSchedule(cost, budget);
    } catch (const InputError&) {
      continue;  // the grid's rounding at the least budget
    }
    const Plan p = planSchedule(s, cost);
    f.push_back({{"budget", budget},
                 {"peak_activation_bytes", p.peakActivationBytes},
                 {"forward_evals", p.stepForwardEvals()},
                 {"flop_overhead", p.flopOverhead()},
                 {"time_overhead", nullable(predictedTimeOverhead(c, s))}});
  }
  return f;
}

}  // namespace

nlohmann::json costsPlansJson(const ChainCosts& c, const ChainCost& cost, const std::vector<CostsPlanRow>& rows,
                              std::optional<int64_t> budget) {
  const int64_t full = planSchedule(storeAllSchedule(cost), cost).peakActivationBytes;
  // Each least budget once: both searches are the costly part of this file.
  const int64_t leastOptimal = std::min(full, optimalMinBudget(cost));
  const int64_t leastPlacement = std::min(full, segmentsMinBudget(cost));
  nlohmann::json j = {{"format", "ckptcheck-costs-plans"},
                      {"version", 1},
                      {"model", c.model},
                      {"framework", c.framework},
                      {"batch_size", c.batchSize},
                      {"layers", c.layers()},
                      {"step_seconds", c.stepSeconds},
                      {"store_all_peak_bytes", full},
                      {"min_feasible_budget", std::min(leastOptimal, leastPlacement)},
                      {"min_placement_budget", leastPlacement},
                      {"budget", budget ? nlohmann::json(*budget) : nlohmann::json(nullptr)}};
  j["cheapest"] = nullptr;
  if (budget)
    if (const CostsPlanRow* r = cheapestUnder(rows, *budget, false))
      j["cheapest"] = {{"policy", r->policy},
                       {"peak_activation_bytes", r->plan.peakActivationBytes},
                       {"flop_overhead", r->plan.flopOverhead()},
                       {"time_overhead", nullable(r->timeOverhead)}};
  j["policies"] = nlohmann::json::array();
  for (const CostsPlanRow& r : rows)
    j["policies"].push_back({{"policy", r.policy},
                             {"family", r.family},
                             {"peak_activation_bytes", r.plan.peakActivationBytes},
                             {"forward_evals", r.plan.stepForwardEvals()},
                             {"flop_overhead", r.plan.flopOverhead()},
                             {"time_overhead", nullable(r.timeOverhead)},
                             {"expressible", r.segments.has_value()},
                             {"why_not", r.whyNot},
                             {"saved_bytes", r.saved ? nlohmann::json(r.saved->total) : nlohmann::json(nullptr)}});
  j["frontier"] = frontierJson(c, cost, leastOptimal, full);
  return j;
}

}  // namespace ckpt
