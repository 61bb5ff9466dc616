#include "harness/engine/placement.h"

#include <algorithm>
#include <stdexcept>

#include "common/input_error.h"
#include "harness/engine/plan.h"

namespace ckpt {
namespace {

bool dropsContexts(const Schedule& s) {
  for (const KeepMask& m : s.keep)
    for (bool k : m)
      if (!k) return true;
  return false;
}

// Per block: its forward runs before the loss (taped or not) and after it.
struct Runs {
  int before = 0, after = 0;
  bool tapedBefore = false, tapedAfter = false;
};

std::string runsText(const Runs& r) {
  return std::to_string(r.before) + (r.tapedBefore ? " taped" : "") + " before the loss, " + std::to_string(r.after) +
         (r.tapedAfter ? " taped" : "") + " after";
}

}  // namespace

std::optional<std::vector<Segment>> placementOrWhy(const Schedule& s, std::string* why) {
  auto no = [&](const std::string& w) -> std::optional<std::vector<Segment>> {
    if (why) *why = w;
    return std::nullopt;
  };
  if (dropsContexts(s))
    return no(
        "its tapes drop op-level contexts (selective): that is PyTorch's selective activation checkpointing, "
        "not a per-module placement");
  const int n = s.layers;
  std::vector<Runs> runs(static_cast<size_t>(n));
  std::vector<int> recomputeRunOf(static_cast<size_t>(n), -1);
  bool afterLoss = false;
  int run = -1, prev = -2;
  for (const Instr& in : s.instrs) {
    if (in.kind == InstrKind::kLoss) afterLoss = true;
    if (in.kind == InstrKind::kBackward) prev = -2;  // a recompute run ends where the backward starts
    if (in.kind != InstrKind::kForward) continue;
    Runs& r = runs[static_cast<size_t>(in.block)];
    if (!afterLoss) {
      ++r.before;
      r.tapedBefore |= in.tape;
      continue;
    }
    ++r.after;
    r.tapedAfter |= in.tape;
    if (in.block != prev + 1) ++run;
    recomputeRunOf[static_cast<size_t>(in.block)] = run;
    prev = in.block;
  }
  std::vector<Segment> segs;
  for (int i = 0; i < n; ++i) {
    const Runs& r = runs[static_cast<size_t>(i)];
    const bool stored = r.before == 1 && r.tapedBefore && r.after == 0;
    const bool recomputed = r.before == 1 && !r.tapedBefore && r.after == 1 && r.tapedAfter;
    if (!stored && !recomputed)
      return no("block " + std::to_string(i) + " runs " + runsText(r) +
                ": a per-module checkpoint runs a block once with its tape, or once without and once more with it "
                "in backward (a nested recompute is not expressible)");
    const int runId = recomputeRunOf[static_cast<size_t>(i)];
    const bool joins = !segs.empty() && segs.back().recompute == recomputed &&
                       (!recomputed || recomputeRunOf[static_cast<size_t>(segs.back().first)] == runId);
    if (joins) segs.back().last = i;
    else segs.push_back({i, i, recomputed});
  }
  return segs;
}

std::vector<Segment> placementOf(const Schedule& s) {
  std::string why;
  auto segs = placementOrWhy(s, &why);
  if (!segs) throw InputError("policy '" + s.policy + "' cannot be applied as a per-module placement: " + why);
  return *segs;
}

Schedule placementSchedule(const std::vector<Segment>& segs, int layers, const std::string& policy) {
  int next = 0;
  for (const Segment& g : segs) {
    if (g.first != next || g.last < g.first) throw std::invalid_argument("placementSchedule: segments out of order");
    next = g.last + 1;
  }
  if (next != layers) throw std::invalid_argument("placementSchedule: segments do not cover the chain");
  Schedule s;
  s.policy = policy;
  s.layers = layers;
  auto push = [&](InstrKind k, int i, bool tape) { s.instrs.push_back({k, i, tape}); };
  auto tapedRun = [&](const Segment& g) {
    for (int i = g.first; i <= g.last; ++i) {
      push(InstrKind::kForward, i, true);
      push(InstrKind::kFree, i, false);
    }
  };
  for (const Segment& g : segs) {
    if (!g.recompute) {
      tapedRun(g);
      continue;
    }
    for (int i = g.first; i <= g.last; ++i) {
      push(InstrKind::kForward, i, false);
      if (i > g.first) push(InstrKind::kFree, i, false);  // interior boundary: rebuilt by the recompute
    }
  }
  push(InstrKind::kLoss, 0, false);
  for (auto it = segs.rbegin(); it != segs.rend(); ++it) {
    if (it->recompute) {
      tapedRun(*it);
      push(InstrKind::kFree, it->last + 1, false);  // rebuilt by the recompute; the backward needs g, not x
    }
    for (int i = it->last; i >= it->first; --i) push(InstrKind::kBackward, i, false);
  }
  return s;
}

std::vector<int64_t> forwardCalls(const Schedule& s) {
  std::vector<int64_t> calls(static_cast<size_t>(s.layers), 0);
  for (const Instr& in : s.instrs)
    if (in.kind == InstrKind::kForward) ++calls[static_cast<size_t>(in.block)];
  return calls;
}

SavedPrediction predictSaved(const ChainCosts& c, const std::vector<Segment>& segs) {
  const int n = c.layers();
  SavedPrediction p;
  p.byBlock.assign(static_cast<size_t>(n), 0);
  // Storage keys: boundary i is i, shared j is n + 1 + j. Internal storages belong to one party only.
  std::vector<char> seen(static_cast<size_t>(n) + 1 + c.shared.size(), 0);
  auto once = [&](int key, int64_t bytes, int64_t& to) {
    if (!seen[static_cast<size_t>(key)]) {
      seen[static_cast<size_t>(key)] = 1;
      to += bytes;
    }
  };
  auto boundary = [&](int i, int64_t& to) { once(i, c.boundaryBytes[static_cast<size_t>(i)], to); };
  auto sharedWhere = [&](int64_t& to, auto&& pred) {
    for (size_t j = 0; j < c.shared.size(); ++j)
      if (pred(c.shared[j])) once(n + 1 + static_cast<int>(j), c.shared[j].bytes, to);
  };
  p.before = c.before.savedBytes;
  if (c.before.savesBoundary) boundary(0, p.before);
  sharedWhere(p.before, [](const SharedStorage& s) { return s.before; });
  for (const Segment& g : segs)
    for (int i = g.first; i <= g.last; ++i) {
      int64_t& to = p.byBlock[static_cast<size_t>(i)];
      const ProfiledBlock& b = c.blocks[static_cast<size_t>(i)];
      if (g.recompute) {
        if (i == g.first) {  // the checkpoint keeps its tensor arguments: the input and the further arguments
          boundary(i, to);
          sharedWhere(to, [](const SharedStorage& s) { return s.argument; });
        }
        continue;
      }
      if (b.savesInput) boundary(i, to);
      to += b.savedBytes();
      sharedWhere(to, [i](const SharedStorage& s) {
        for (int k : s.savedBy)
          if (k == i) return true;
        return false;
      });
      if (b.savesOutput) boundary(i + 1, to);
    }
  p.after = c.after.savedBytes;
  if (c.after.savesBoundary) boundary(n, p.after);
  sharedWhere(p.after, [](const SharedStorage& s) { return s.after; });
  p.total = p.before + p.after;
  for (int64_t b : p.byBlock) p.total += b;
  return p;
}

std::optional<double> predictedTimeOverhead(const ChainCosts& c, const Schedule& s) {
  if (dropsContexts(s) || !(c.stepSeconds > 0)) return std::nullopt;
  const std::vector<int64_t> calls = forwardCalls(s);
  double extra = 0;
  for (int i = 0; i < c.layers(); ++i) {  // a negative measurement never makes a recompute cost less than 0
    const ProfiledBlock& b = c.blocks[static_cast<size_t>(i)];
    const size_t next = static_cast<size_t>(i) + 1;
    const bool nextStored = next == calls.size() || calls[next] == 1;  // the part after the chain is never recomputed
    double once = b.forwardSeconds + c.checkpointSeconds;
    if (b.recomputeSeconds) once = nextStored && b.recomputeEndSeconds ? *b.recomputeEndSeconds : *b.recomputeSeconds;
    extra += static_cast<double>(calls[static_cast<size_t>(i)] - 1) * std::max(0.0, once);
  }
  return extra / c.stepSeconds;
}

nlohmann::json placementJson(const ChainCosts& c, const ChainCost& cost, const Schedule& s,
                             const std::vector<Segment>& segs) {
  nlohmann::json j;
  j["format"] = kPlacementFormat;
  j["version"] = kPlacementVersion;
  j["model"] = c.model;
  j["policy"] = s.policy;
  j["batch_size"] = c.batchSize;
  j["blocks"] = nlohmann::json::array();
  for (const ProfiledBlock& b : c.blocks) j["blocks"].push_back(b.name);
  j["segments"] = nlohmann::json::array();
  for (const Segment& g : segs)
    j["segments"].push_back({{"first", g.first}, {"last", g.last}, {"recompute", g.recompute}});
  const SavedPrediction saved = predictSaved(c, segs);
  const Plan plan = planSchedule(s, cost);
  const auto time = predictedTimeOverhead(c, s);
  j["predicted"] = {{"saved_bytes", saved.total},
                    {"saved_bytes_before", saved.before},
                    {"saved_bytes_after", saved.after},
                    {"saved_bytes_by_block", saved.byBlock},
                    {"forward_calls", forwardCalls(s)},
                    {"peak_activation_bytes", plan.peakActivationBytes},
                    {"flop_overhead", plan.flopOverhead()},
                    {"time_overhead", time ? nlohmann::json(*time) : nlohmann::json(nullptr)}};
  return j;
}

}  // namespace ckpt
