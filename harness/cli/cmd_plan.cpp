// ckptcheck plan: what a policy's schedule costs on a case or on a homogeneous chain of L blocks, predicted by
// the planner without tensors (a chain of 10^6 blocks is never allocated).
#include <iostream>
#include <optional>
#include <nlohmann/json.hpp>

#include "cases/block_kind.h"
#include "cases/case_json.h"
#include "harness/cli/commands.h"
#include "harness/atomic_file.h"
#include "harness/engine/costs_plans.h"
#include "harness/engine/plan.h"
#include "harness/engine/policy.h"
#include "harness/engine/resource_guard.h"

namespace ckpt::cli {
namespace {

struct Options {
  std::string casePath;
  std::string costsPath;
  int64_t budget = 0;
  std::string placementPath;
  int64_t layers = 0;
  int64_t width = 256;
  int64_t batch = 32;
  int64_t seq = 1;
  int64_t heads = 1;
  double dropout = 0.1;
  std::string kind = "mlp";
  std::string dtype = "float";
  std::string policy;
  bool json = false;
  bool schedule = false;
};

// The one-block case a --layers chain repeats, validated as any case file is.
CaseSpec homogeneousSpec(const Options& o) {
  nlohmann::json block = {{"kind", o.kind}};
  // --heads goes to the kinds that take heads (the transformer's field), as a case file would give it; another
  // kind refuses it rather than ignore it.
  if (const BlockKindDef* d = findBlockKind(o.kind))
    for (const BlockField& f : d->fields)
      if (std::string(f.name) == "heads") block["heads"] = o.heads;
  if (o.heads != 1 && !block.contains("heads"))
    throw InputError("--heads " + std::to_string(o.heads) + ": --kind " + o.kind + " takes no heads");
  nlohmann::json j = {{"name", "homogeneous-" + o.kind},
                      {"dtype", o.dtype},
                      {"batch", o.batch},
                      {"seq", o.seq},
                      {"width", o.width},
                      {"dropout", o.dropout},
                      {"blocks", nlohmann::json::array({block})}};
  return parseCase(j);
}

std::vector<std::string> kindNames() {
  std::vector<std::string> names;
  for (const BlockKindDef* d : blockKinds()) names.push_back(d->name);
  return names;
}

// A step's figures: with micro-batches, the peak is one micro-batch's and the evaluations and FLOPs the step's
// (what `run` measures).
nlohmann::json planJson(const Schedule& s, const Plan& p, int layers) {
  nlohmann::json j;
  const FlopCounts f = p.stepFlops();
  j["policy"] = s.policy;
  j["layers"] = layers;
  j["micro_batches"] = p.passes;
  j["forward_evals"] = p.stepForwardEvals();
  j["peak_activation_bytes"] = p.peakActivationBytes;
  j["flops"] = {{"forward", f.forward}, {"recompute", f.recompute}, {"backward", f.backward}};
  j["flop_overhead"] = p.flopOverhead();
  return j;
}

// --costs: a profiled model (harness/engine/COSTS.md). With --policy, that policy's plan, its predicted time
// overhead and, when a placement can express it, its predicted saved bytes (and --placement writes it); with
// --budget alone, the cheapest policy under the budget and the cheapest a placement can express.
void planCosts(const Options& o) {
  const ChainCosts costs = loadChainCosts(o.costsPath);
  const ChainCost cost = chainCostOf(costs);
  std::optional<int64_t> budget;
  if (o.budget > 0) budget = o.budget;
  const CostsPlanRow* chosen = nullptr;
  std::vector<CostsPlanRow> rows;
  if (!o.policy.empty()) {
    rows.push_back(planCostsPolicy(costs, cost, o.policy));
    chosen = &rows.back();
    if (budget && chosen->plan.peakActivationBytes > *budget)
      throw InputError("plan: policy '" + chosen->policy + "' peaks at " +
                       std::to_string(chosen->plan.peakActivationBytes) + " bytes, over --budget " +
                       std::to_string(*budget));
  } else {
    const int64_t least = costsMinBudget(cost);
    if (*budget < least)
      throw InputError("plan: --budget " + std::to_string(*budget) + " is below the smallest feasible budget, " +
                       std::to_string(least) + " bytes");
    rows = planCostsPolicies(costs, cost, budget);
    chosen = cheapestUnder(rows, *budget, !o.placementPath.empty());
    if (!chosen)
      throw InputError("plan: no policy a placement can express fits --budget " + std::to_string(*budget) +
                       " (the smallest such budget is " + std::to_string(segmentsMinBudget(cost)) + " bytes)");
  }
  if (!o.placementPath.empty()) {
    const std::vector<Segment> segs = placementOf(chosen->schedule);
    writeFileAtomic(o.placementPath, placementJson(costs, cost, chosen->schedule, segs).dump(2) + "\n");
  }
  nlohmann::json j = planJson(chosen->schedule, chosen->plan, cost.layers());
  j["model"] = costs.model;
  j["time_overhead"] = chosen->timeOverhead ? nlohmann::json(*chosen->timeOverhead) : nlohmann::json(nullptr);
  j["expressible"] = chosen->segments.has_value();
  if (!chosen->segments) j["why_not"] = chosen->whyNot;
  if (chosen->saved) j["saved_bytes"] = chosen->saved->total;
  if (budget) {
    j["budget"] = *budget;
    if (o.policy.empty())
      if (const CostsPlanRow* any = cheapestUnder(rows, *budget, false); any && any != chosen)
        j["cheapest_any"] = any->policy;
  }
  if (o.json) {
    std::cout << j.dump(2) << "\n";
    return;
  }
  const FlopCounts f = chosen->plan.stepFlops();
  std::cout << "policy " << chosen->policy << " on " << costs.model << " (" << cost.layers() << " blocks"
            << (budget && o.policy.empty() ? ", the cheapest under " + std::to_string(*budget) + " bytes" : "") << ")\n"
            << "  peak activation bytes  " << chosen->plan.peakActivationBytes << "\n"
            << "  forward evaluations    " << chosen->plan.stepForwardEvals() << "\n"
            << "  FLOPs forward          " << f.forward << "\n"
            << "  FLOPs recompute        " << f.recompute << "\n"
            << "  FLOP overhead          " << chosen->plan.flopOverhead() << "\n"
            << "  time overhead          "
            << (chosen->timeOverhead ? std::to_string(*chosen->timeOverhead) + " (predicted)" : "n/a") << "\n";
  if (chosen->saved)
    std::cout << "  saved bytes            " << chosen->saved->total << " (predicted, as PyTorch counts them)\n";
  else std::cout << "  placement              not expressible: " << chosen->whyNot << "\n";
  if (j.contains("cheapest_any"))
    std::cout << "  cheapest of any form   " << j["cheapest_any"].get<std::string>() << "\n";
  if (!o.placementPath.empty()) std::cout << "  placement written to   " << o.placementPath << "\n";
}

}  // namespace

void addPlan(CLI::App& app, int& exitCode) {
  auto o = std::make_shared<Options>();
  auto* cmd = app.add_subcommand("plan", "Predict a policy's peak activation bytes, forward evaluations and FLOPs");
  auto* caseOpt = cmd->add_option("--case", o->casePath, "Case JSON file (cases/SCHEMA.md)");
  auto* layersOpt = cmd->add_option("--layers", o->layers, "Plan a homogeneous chain of L blocks instead of a case")
                        ->check(CLI::Range(int64_t{1}, int64_t{1} << 30));
  caseOpt->excludes(layersOpt);
  auto* costsOpt = cmd->add_option("--costs", o->costsPath, "A profiled model's chain costs (ckptcheck profile)");
  costsOpt->excludes(caseOpt)->excludes(layersOpt);
  cmd->add_option("--budget", o->budget,
                  "With --costs: the activation budget in bytes (alone: the cheapest policy under it)")
      ->check(CLI::Range(int64_t{1}, int64_t{1} << 62))
      ->needs(costsOpt);
  cmd->add_option("--placement", o->placementPath,
                  "With --costs: write the plan as a placement file (harness/engine/COSTS.md)")
      ->needs(costsOpt);
  cmd->add_option("--width", o->width, "Homogeneous chain: width (default 256)")->needs(layersOpt);
  cmd->add_option("--batch", o->batch, "Homogeneous chain: batch (default 32)")->needs(layersOpt);
  cmd->add_option("--seq", o->seq, "Homogeneous chain: tokens per sequence (default 1)")->needs(layersOpt);
  cmd->add_option("--heads", o->heads, "Homogeneous chain: attention heads, transformer only (default 1)")
      ->needs(layersOpt);
  cmd->add_option("--dropout", o->dropout, "Homogeneous chain: dropout probability (default 0.1)")->needs(layersOpt);
  cmd->add_option("--kind", o->kind, "Homogeneous chain: block kind (default mlp)")
      ->check(CLI::IsMember(kindNames()))
      ->needs(layersOpt);
  cmd->add_option("--dtype", o->dtype, "Homogeneous chain: float or double (default float)")
      ->check(CLI::IsMember({"float", "double"}))
      ->needs(layersOpt);
  cmd->add_option("--policy", o->policy, "Policy string, e.g. uniform:k=8, uniform+selective or schedule:FILE");
  cmd->add_flag("--json", o->json, "Machine-readable output");
  cmd->add_flag("--schedule", o->schedule, "Also print the schedule");
  cmd->callback([o, &exitCode] {
    if (!o->costsPath.empty()) {
      if (o->policy.empty() && o->budget == 0) throw InputError("plan: with --costs give --policy P or --budget BYTES");
      planCosts(*o);
      exitCode = 0;
      return;
    }
    if (o->casePath.empty() && o->layers == 0) throw InputError("plan: give --case FILE, --layers L or --costs FILE");
    if (o->policy.empty()) throw InputError("plan: --policy is required");
    const PolicySpec policy = parsePolicy(o->policy);
    const CaseSpec spec = o->casePath.empty() ? homogeneousSpec(*o) : loadCase(o->casePath);
    guardPlanning(spec);  // planning builds one block of each kind
    const ChainCost cost = o->casePath.empty() ? homogeneousChainCost(spec, o->layers) : caseChainCost(spec);
    const Schedule s = makeSchedule(policy, cost);
    const Plan p = planSchedule(s, cost);
    const nlohmann::json j = planJson(s, p, cost.layers());
    if (o->json) {
      nlohmann::json out = j;
      if (o->schedule) out["schedule"] = toJson(s);
      std::cout << out.dump(2) << "\n";
    } else {
      const FlopCounts f = p.stepFlops();
      std::cout << "policy " << s.policy << " on " << cost.layers() << " layers"
                << (p.passes > 1 ? ", " + std::to_string(p.passes) +
                                       " micro-batches (peak: one micro-batch's; the rest: the step's)"
                                 : "")
                << "\n"
                << "  peak activation bytes  " << p.peakActivationBytes << "\n"
                << "  forward evaluations    " << p.stepForwardEvals() << "\n"
                << "  FLOPs forward          " << f.forward << "\n"
                << "  FLOPs recompute        " << f.recompute << "\n"
                << "  FLOPs backward         " << f.backward << "\n"
                << "  FLOP overhead          " << p.flopOverhead() << "\n";
      if (o->schedule) std::cout << toText(s);
    }
    exitCode = 0;
  });
}

}  // namespace ckpt::cli
