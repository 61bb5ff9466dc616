#include "harness/verify/properties.h"

#include <algorithm>
#include <cmath>
#include <stdexcept>

#include "cases/stochastic_layers.h"
#include "harness/diagnose_steps.h"
#include "harness/dtype_dispatch.h"
#include "harness/engine/chain_costs_of.h"
#include "harness/engine/executor.h"
#include "harness/engine/placement.h"
#include "harness/engine/policy.h"
#include "harness/engine/policy_rule.h"
#include "harness/verify/draws_replayed.h"
#include "reference/trainer.h"

namespace ckpt {

namespace {

// The chain's initial parameters, module state and generator: every run of a trial starts from them, so one
// chain serves the reference and every policy.
template <class T>
class InitialState {
 public:
  explicit InitialState(Chain<T>& c) : rng_(c.rng.state()) {
    for (auto* p : c.params()) params_.push_back(p->value);
    for (auto* b : c.buffers()) buffers_.push_back(b->value);
  }
  void restore(Chain<T>& c) const {
    size_t i = 0;
    for (auto* p : c.params()) p->value = params_[i++];
    i = 0;
    for (auto* b : c.buffers()) b->value = buffers_[i++];
    c.rng.setState(rng_);
  }

 private:
  std::vector<Mat<T>> params_;
  std::vector<Mat<T>> buffers_;
  RngState rng_;
};

// The chain's buffers before any step: what diagnoseSteps judges a second running-statistic update from.
template <class T>
std::vector<NamedMat<T>> initialBuffers(Chain<T>& c) {
  std::vector<NamedMat<T>> out;
  for (auto* b : c.buffers()) out.push_back({b->name, b->value});
  return out;
}

// The run once more with its draws replayed (draws_replayed.h: the engine's own hooks but for its generator
// handling in recomputes), against the same reference: equal bit for bit? A run that throws explains nothing.
template <class T, class Train>
bool equalWithDrawsReplayed(const std::vector<StepResult<T>>& reference, const Schedule& s, const EngineVariant& engine,
                            Train&& train) {
  const DrawsReplayed replayed(engine);
  try {
    return compareSteps(reference, train(s, replayed)).bitwiseEqual;
  } catch (const std::exception&) {
    return false;
  }
}

// Runs every policy that has a schedule through `train` ((schedule, engine) -> its steps' results) and records it
// against the reference, with the class of any difference: validate's diagnoseSteps at its ULP level, and one
// re-run (worthDropoutOffRerun, harness/diagnose.h) for a semantic difference in a case that draws random numbers:
// the same run with its draws replayed. An exception of type Error is the engine failing mid-step (property 1's
// finding); anything else propagates (on a device: no GPU, a CUDA error).
template <class Error, class T, class Train>
void recordRuns(Trial& t, const std::vector<StepResult<T>>& reference, const std::vector<NamedMat<T>>& initial,
                const EngineVariant& engine, Train&& train) {
  for (PolicyRun& r : t.runs) {
    if (!r.scheduleError.empty()) continue;
    std::vector<StepResult<T>> got;
    try {
      got = train(r.schedule, engine);
    } catch (const Error& e) {
      r.engineError = e.what();
      continue;
    }
    r.ran = true;
    r.comparison = compareSteps(reference, got);
    if (!r.comparison.bitwiseEqual) {
      r.diagnosis = diagnoseSteps(reference, got, initial, kRoundingLevelUlp, t.spec.microBatches);
      if (r.diagnosis && worthDropoutOffRerun(*r.diagnosis, drawsRandomNumbers(t.spec)) &&
          equalWithDrawsReplayed(reference, r.schedule, engine, train))
        r.diagnosis = drawsReplayedDiagnosis();
    }
    for (const auto& g : got) r.measured.push_back({g.peakActivationBytes, g.forwardEvals, g.flops});
  }
}

// The reference is the correct engine's store-all run on the same device; the policies run with `engine`. A
// std::logic_error (which std::invalid_argument is) is the engine or its variant failing mid-step; a
// std::runtime_error (no device, a CUDA error) propagates.
template <class T>
void runOnDevice(Trial& t, const EngineVariant& engine, Device device) {
  const int steps = t.spec.steps;
  const auto reference = deviceSteps<T>(device, t.spec, storeAllSchedule(t.cost), steps);
  Chain<T> host = buildChain<T>(t.spec);  // the device chain is built from the same spec: the same buffers
  recordRuns<std::logic_error>(
      t, reference, initialBuffers(host), engine,
      [&](const Schedule& s, const EngineVariant& e) { return deviceSteps<T>(device, t.spec, s, steps, e); });
}

template <class T>
void runEngines(Trial& t, const EngineVariant& engine) {
  const int steps = t.spec.steps;
  Chain<T> chain = buildChain<T>(t.spec);
  const InitialState<T> initial(chain);
  const std::vector<NamedMat<T>> buffers = initialBuffers(chain);
  const auto reference = trainReference(chain, steps);
  recordRuns<std::exception>(t, reference, buffers, engine, [&](const Schedule& s, const EngineVariant& e) {
    initial.restore(chain);
    std::vector<StepResult<T>> got;
    for (int k = 0; k < steps; ++k) got.push_back(executeStep(chain, s, k, e));
    return got;
  });
}

// What one pass of a run cost (a step's, or one micro-batch's, as a policy's bounds speak of): measured where the
// engine ran (every step and pass the same, property 2 checks that), else planned.
StepCost costOf(const PolicyRun& r) {
  if (r.ran && !r.measured.empty()) {
    StepCost c = r.measured[0];
    for (const auto& m : r.measured) c.peakActivationBytes = std::max(c.peakActivationBytes, m.peakActivationBytes);
    const int64_t n = r.plan.passes;
    c.forwardEvals /= n;
    c.flops = {c.flops.forward / n, c.flops.recompute / n, c.flops.backward / n};
    return c;
  }
  return {r.plan.peakActivationBytes, r.plan.forwardEvals, r.plan.flops};
}

// M: the largest peak of one block trained alone under store-all (its input, tape, output, the loss, gradients).
int64_t largestLayerPeak(const ChainCost& c) {
  int64_t m = 0;
  for (const BlockProgram& p : c.programs) {
    ChainCost one;
    one.programs = {p};
    one.programOf = {0};
    one.inputBytes = c.inputBytes;
    one.loss = c.loss;
    m = std::max(m, planSchedule(storeAllSchedule(one), one).peakActivationBytes);
  }
  return m;
}

Violation violation(const PolicyRun& r, std::string message) {
  return Violation{nullptr, r.policy, std::move(message), std::nullopt, std::nullopt};
}

}  // namespace

Trial runTrial(const CaseSpec& spec, const std::vector<std::string>& policies, const EngineVariant& engine,
               Device device) {
  Trial t;
  t.spec = spec;
  t.cost = caseChainCost(spec);
  for (const auto& p : policies) {
    PolicyRun r;
    r.policy = p;
    try {
      r.schedule = makeSchedule(parsePolicy(p), t.cost);
      validateSchedule(r.schedule, t.cost);
      r.plan = planSchedule(r.schedule, t.cost);
    } catch (const std::exception& e) {
      r.scheduleError = e.what();
    }
    t.runs.push_back(std::move(r));
  }
  withScalar(spec.dtype, [&](auto x) {
    if (device == Device::kCpu) runEngines<decltype(x)>(t, engine);
    else runOnDevice<decltype(x)>(t, engine, device);
  });
  return t;
}

namespace {

// The properties' checks, in number order; properties() at the end of this file lists them.

std::optional<Violation> bitwiseEqualToReference(const Trial& t) {
  for (const PolicyRun& r : t.runs) {
    if (!r.scheduleError.empty()) continue;  // nothing ran: property 3's finding
    if (!r.engineError.empty()) return violation(r, "the engine failed mid-step: " + r.engineError);
    if (!r.comparison.bitwiseEqual) {
      const Difference& d = r.comparison.differences.front();
      Violation v =
          violation(r, std::to_string(r.comparison.differences.size()) + " tensor(s) differ; first: " + toText(d));
      v.difference = d;
      v.diagnosis = r.diagnosis;
      return v;
    }
  }
  return std::nullopt;
}

std::optional<Violation> plannedEqualsMeasured(const Trial& t) {
  for (const PolicyRun& r : t.runs) {
    if (!r.ran) continue;
    for (size_t s = 0; s < r.measured.size(); ++s) {
      const StepCost& m = r.measured[s];
      const Plan& p = r.plan;
      auto check = [&](const char* what, int64_t planned, int64_t measured) -> std::optional<Violation> {
        if (planned == measured) return std::nullopt;
        return violation(r, "step " + std::to_string(s) + " " + what + ": planned " + std::to_string(planned) +
                                ", measured " + std::to_string(measured));
      };
      // A step runs the schedule once per micro-batch: the plan is one pass's.
      const FlopCounts f = p.stepFlops();
      for (auto v : {check("peak_activation_bytes", p.peakActivationBytes, m.peakActivationBytes),
                     check("forward_evals", p.stepForwardEvals(), m.forwardEvals),
                     check("flops.forward", f.forward, m.flops.forward),
                     check("flops.recompute", f.recompute, m.flops.recompute),
                     check("flops.backward", f.backward, m.flops.backward)})
        if (v) return v;
    }
  }
  return std::nullopt;
}

std::optional<Violation> schedulesAreValid(const Trial& t) {
  for (const PolicyRun& r : t.runs)
    if (!r.scheduleError.empty()) return violation(r, r.scheduleError);
  return std::nullopt;
}

std::optional<Violation> withinBounds(const Trial& t) {
  int64_t cachedM = -1;  // M, computed when a bound needs it
  const std::function<int64_t()> largest = [&] {
    if (cachedM < 0) cachedM = largestLayerPeak(t.cost);
    return cachedM;
  };
  // The runs optimal is compared with: every run of another family, or the one optimalRival picks of them.
  std::vector<const PolicyRun*> rivals;
  for (const PolicyRun& r : t.runs)
    if (r.scheduleError.empty() && parsePolicy(r.schedule.policy).name != "optimal") rivals.push_back(&r);
  if (t.optimalRival >= 0 && !rivals.empty()) rivals = {rivals[static_cast<size_t>(t.optimalRival) % rivals.size()]};
  for (const PolicyRun& r : t.runs) {
    if (!r.scheduleError.empty()) continue;
    const PolicySpec policy = parsePolicy(r.schedule.policy);  // canonical: uniform's k as clamped to [1, L]
    const StepCost c = costOf(r);
    const PolicyRule* rule = findPolicyRule(policy.name);
    if (rule && rule->bound) {
      const std::string why =
          rule->bound({policy, t.cost, c.peakActivationBytes, c.forwardEvals, c.flops.recompute, largest});
      if (!why.empty()) return violation(r, why);
    }
    if (policy.name == "optimal") continue;  // compared with the others below, not with itself
    // Optimal at this run's own peak, with the same op-level masks, must not recompute more.
    if (std::find(rivals.begin(), rivals.end(), &r) == rivals.end()) continue;
    OptimalPlan best;
    try {
      best = optimalPlan(t.cost, c.peakActivationBytes, OptimalOptions{.keep = r.schedule.keep});
    } catch (const std::exception& e) {
      return violation(r, "optimal refused this policy's own peak " + std::to_string(c.peakActivationBytes) +
                              " bytes as its budget: " + e.what());
    }
    if (!best.exactGrid) continue;  // a rounded grid promises feasibility only
    const Plan bestPlan = planSchedule(best.schedule, t.cost);
    if (bestPlan.flops.recompute > c.flops.recompute)
      return violation(r, "optimal:budget=" + std::to_string(c.peakActivationBytes) + " recomputes " +
                              std::to_string(bestPlan.flops.recompute) + " FLOPs, more than this policy's " +
                              std::to_string(c.flops.recompute) + " at the same peak");
  }
  return std::nullopt;
}

// One plan of the DP checked against the planner; empty when they agree and the plan fits.
std::string optimalPlanMismatch(const Trial& t, const ChainCost& c, int64_t budget, const OptimalOptions& options) {
  const std::string at = "optimal:budget=" + std::to_string(budget) + ": ";
  const std::vector<KeepMask>& keep = options.keep;
  OptimalPlan o;
  try {
    o = t.planOptimal ? t.planOptimal(c, budget, options) : optimalPlan(c, budget, options);
  } catch (const std::exception& e) {
    return at + "the DP refused a feasible budget: " + e.what();
  }
  Plan p;
  try {
    validateSchedule(o.schedule, c);
    p = planSchedule(o.schedule, c);
  } catch (const std::exception& e) {
    return at + "the DP's schedule cannot be planned: " + e.what();
  }
  const std::string grid = " (grid: " + std::to_string(o.levels) + " levels of " + std::to_string(o.unitBytes) +
                           " bytes, " + (o.exactGrid ? "exact" : "rounded") +
                           (o.minPeakFallback ? ", least-peak fallback" : "") + ")";
  if (p.peakActivationBytes > budget)
    return at + "the planner's peak " + std::to_string(p.peakActivationBytes) + " bytes is over the budget" + grid;
  // The DP's memory model may only be above the planner's (optimal.cpp: conservative where a block's last op
  // saves its output), and what it promises must fit the budget.
  if (o.peakBytes < p.peakActivationBytes || o.peakBytes > budget)
    return at + "the DP predicted a peak of " + std::to_string(o.peakBytes) + " bytes, the planner walks " +
           std::to_string(p.peakActivationBytes) + grid;
  // The DP counts block forwards only; op-level masks add the dropped ops' recompute in every block's backward,
  // the same under any schedule: what store-all with those masks recomputes.
  int64_t opLevel = 0;
  if (!keep.empty()) {
    Schedule all = storeAllSchedule(c);
    all.keep = keep;
    opLevel = planSchedule(all, c).flops.recompute;
  }
  if (o.recomputeFlops + opLevel != p.flops.recompute)
    return at + "the DP predicted " + std::to_string(o.recomputeFlops) + " block-recompute FLOPs (+ " +
           std::to_string(opLevel) + " op-level), the planner counts " + std::to_string(p.flops.recompute) + grid;
  return {};
}

// A chain of `layers` blocks, each like the case's first: one block program, so the DP tabulates range lengths
// only and a chain of a thousand blocks plans in a fraction of a second.
ChainCost homogeneousChain(const ChainCost& c, int layers) {
  ChainCost longChain = c;
  longChain.programOf.assign(static_cast<size_t>(layers), c.programOf.at(0));
  return longChain;
}

std::optional<Violation> optimalPlansConsistent(const Trial& t) {
  for (const PolicyRun& r : t.runs) {
    if (!r.scheduleError.empty()) continue;
    const PolicySpec policy = parsePolicy(r.schedule.policy);
    if (policy.name != "optimal") continue;
    const std::string why = optimalPlanMismatch(t, t.cost, intParam(policy, "budget"), {.keep = r.schedule.keep});
    if (!why.empty()) return violation(r, why);
  }
  if (t.longLayers > 0 && !t.cost.programOf.empty()) {
    const ChainCost c = homogeneousChain(t.cost, t.longLayers);
    const int64_t full = planSchedule(storeAllSchedule(c), c).peakActivationBytes;
    const int64_t least = std::min(full, optimalMinBudget(c, {}));
    const int64_t budget = least + (full - least) * std::clamp(t.longBudget, 0, 1000) / 1000;
    // On its own grid of OptimalOptions::levels, as the long chain is for: the coarse grid's rounding (a finer
    // grid, which the planner would pick as the budget allows, would cost up to 400 million cell updates here).
    const std::string why = optimalPlanMismatch(t, c, budget, {.refine = false, .keep = {}});
    if (!why.empty())
      return Violation{nullptr, "optimal:budget=" + std::to_string(budget),
                       "on a long chain of " + std::to_string(t.longLayers) + " blocks like block 0 (budget " +
                           std::to_string(t.longBudget) + "/1000 of [" + std::to_string(least) + ", " +
                           std::to_string(full) + "]): " + why,
                       std::nullopt, std::nullopt};
  }
  return std::nullopt;
}

// The planner's live bytes when the forward pass ends: after the instruction before the loss.
int64_t liveAtLoss(const Schedule& s, const Plan& p) {
  for (size_t k = 0; k < s.instrs.size(); ++k)
    if (s.instrs[k].kind == InstrKind::kLoss) return k == 0 ? 0 : p.liveAfter[k - 1];
  throw std::logic_error("a schedule without its loss");
}

// "" when `r`'s placement round-trips and predicts the planner's saved bytes (the chain costs made once, on demand).
std::string placementMismatch(const Trial& t, const PolicyRun& r, const std::vector<Segment>& segs,
                              std::optional<ChainCosts>& costs) {
  const Schedule back = placementSchedule(segs, r.schedule.layers, r.schedule.policy);
  std::string why;
  const auto again = placementOrWhy(back, &why);
  const std::string n = std::to_string(segs.size()) + " segment(s)";
  if (!again) return "the schedule of its placement (" + n + ") is no placement: " + why;
  if (*again != segs) return "the schedule of its placement (" + n + ") reads back as " + std::to_string(again->size());
  const Plan p = planSchedule(back, t.cost);
  auto differs = [&](const char* what, int64_t policy, int64_t placement) {
    return "its placement (" + n + ") plans " + what + " " + std::to_string(placement) + ", the policy's schedule " +
           std::to_string(policy);
  };
  if (p.peakActivationBytes != r.plan.peakActivationBytes)
    return differs("peak_activation_bytes", r.plan.peakActivationBytes, p.peakActivationBytes);
  if (p.forwardEvals != r.plan.forwardEvals) return differs("forward_evals", r.plan.forwardEvals, p.forwardEvals);
  if (p.flops.recompute != r.plan.flops.recompute)
    return differs("flops.recompute", r.plan.flops.recompute, p.flops.recompute);
  if (!costs) costs = chainCostsOf(t.cost);
  const int64_t predicted = predictSaved(*costs, segs).total, live = liveAtLoss(back, p);
  if (predicted != live)
    return "COSTS.md predicts " + std::to_string(predicted) + " saved bytes for its placement (" + n +
           "), the planner holds " + std::to_string(live) + " when the forward pass ends";
  return "";
}

std::optional<Violation> placementsRoundTrip(const Trial& t) {
  std::optional<ChainCosts> costs;
  for (const PolicyRun& r : t.runs) {
    if (!r.scheduleError.empty()) continue;
    std::string why;
    const auto segs = placementOrWhy(r.schedule, &why);
    if (!segs) {
      if (parsePolicy(r.schedule.policy).name == "segments")
        return violation(r, "segments' schedule is no per-module placement: " + why);
      continue;
    }
    if (const std::string bad = placementMismatch(t, r, *segs, costs); !bad.empty()) return violation(r, bad);
  }
  return std::nullopt;
}

}  // namespace

const std::vector<PropertyDef>& properties() {
  static const std::vector<PropertyDef> table = {
      {"bitwise-equal", "every policy is bitwise equal to the reference (loss, grads, input grad, state, RNG)",
       bitwiseEqualToReference},
      {"planned-equals-measured", "measured peak bytes, forward evaluations and FLOPs per phase equal the plan",
       plannedEqualsMeasured},
      {"schedules-valid", "every policy emits a schedule that passes the validator", schedulesAreValid},
      {"bounds", "store-all, uniform, recursive, revolve, optimal and segments stay within their bounds", withinBounds},
      {"optimal-plan-consistent",
       "the optimal DP's predicted peak and recompute FLOPs match the planner's, within budget, on short and long "
       "chains",
       optimalPlansConsistent},
      {"placement-round-trip",
       "a placement's schedule reads back as it and plans as the policy's; its predicted saved bytes are the planner's",
       placementsRoundTrip},
  };
  return table;
}

int propertyNumber(Property p) { return static_cast<int>(p - properties().data()) + 1; }

Property findProperty(std::string_view id) {
  for (const PropertyDef& p : properties())
    if (id == p.id) return &p;
  return nullptr;
}

std::optional<Violation> checkProperty(Property p, const Trial& t) {
  std::optional<Violation> v;
  try {
    v = p->check(t);
  } catch (const std::exception& e) {
    // A policy whose output cannot even be checked (a schedule the planner rejects, a DP that throws) is broken:
    // that is this property's finding, shrunk like any other.
    v = Violation{nullptr, "", std::string("checking it failed: ") + e.what(), std::nullopt, std::nullopt};
  }
  if (v) v->property = p;
  return v;
}

}  // namespace ckpt
