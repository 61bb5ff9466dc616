// store-all: the reference trainer's schedule. Every block's whole tape is stored on the way forward and the
// executor drops its own handle on each boundary as soon as the next exists (a tape shares x_i when its first
// op saves its input), so the bytes are exactly those of reference/trainer.h.
#include "harness/engine/policy.h"
#include "harness/engine/policy_rule.h"

namespace ckpt {

Schedule storeAllSchedule(const ChainCost& c) {
  const int n = c.layers();
  Schedule s;
  s.policy = "store-all";
  s.layers = n;
  s.instrs.reserve(3 * static_cast<size_t>(n) + 1);
  for (int i = 0; i < n; ++i) {
    s.instrs.push_back({InstrKind::kForward, i, true});
    s.instrs.push_back({InstrKind::kFree, i, false});
  }
  s.instrs.push_back({InstrKind::kLoss, 0, false});
  for (int i = n - 1; i >= 0; --i) s.instrs.push_back({InstrKind::kBackward, i, false});
  return s;
}

// Property 4: store-all never recomputes (composed with selective, its masks make op-level recomputes).
PolicyRule storeAllRule() {
  PolicyRule r;
  r.name = "store-all";
  r.make = [](const PolicySpec&, const ChainCost& c, const std::vector<KeepMask>&) { return storeAllSchedule(c); };
  r.byDefault = [](const ChainCost&) { return std::vector<std::string>{"store-all"}; };
  r.draw = [](const PolicyDraw&, const ChainCost&, const std::function<std::vector<KeepMask>()>&) {
    return std::string("store-all");
  };
  r.bound = [](const BoundCheck& b) -> std::string {
    const int n = b.cost.layers();
    if (b.policy.selective || (b.recomputeFlops == 0 && b.forwardEvals == n)) return "";
    return "store-all recomputed: " + std::to_string(b.forwardEvals) + " forward evaluations for " + std::to_string(n) +
           " blocks, " + std::to_string(b.recomputeFlops) + " recompute FLOPs";
  };
  return r;
}

}  // namespace ckpt
