// uniform:k=K — K segments of near-equal length (segment s is [s L / K, (s+1) L / K)), PyTorch's
// checkpoint_sequential. Forward: each segment but the last runs without a tape, keeping only its input; the
// last segment runs with tapes straight away (recomputing it would only repeat work: its tapes are what the
// backward needs first, and they are no bigger than any other segment's at backward time). Backward, segment by
// segment from the last: recompute the segment from its held input with tapes, then back through it. Every
// boundary is freed as soon as nothing needs it.
#include <algorithm>

#include "harness/engine/policy.h"
#include "harness/engine/policy_rule.h"

namespace ckpt {
namespace {

void forward(Schedule& s, int i, bool tape) { s.instrs.push_back({InstrKind::kForward, i, tape}); }
void freeX(Schedule& s, int i) { s.instrs.push_back({InstrKind::kFree, i, false}); }
void backward(Schedule& s, int i) { s.instrs.push_back({InstrKind::kBackward, i, false}); }

// Forward through [a, b) with tapes from a held x_a, freeing each input once its block has run. x_b stays held.
void tapedRun(Schedule& s, int a, int b) {
  for (int i = a; i < b; ++i) {
    forward(s, i, true);
    freeX(s, i);
  }
}

}  // namespace

Schedule uniformSchedule(const ChainCost& c, int segments) {
  const int n = c.layers();
  const int k = std::clamp(segments, 1, n);
  auto start = [&](int seg) { return static_cast<int>(static_cast<int64_t>(seg) * n / k); };
  Schedule s;
  s.policy = "uniform:k=" + std::to_string(k);
  s.layers = n;
  for (int seg = 0; seg + 1 < k; ++seg) {
    const int a = start(seg), b = start(seg + 1);
    for (int i = a; i < b; ++i) {
      forward(s, i, false);
      if (i > a) freeX(s, i);  // interior boundary: rebuilt by the recompute
    }
  }
  tapedRun(s, start(k - 1), n);
  s.instrs.push_back({InstrKind::kLoss, 0, false});
  for (int i = n - 1; i >= start(k - 1); --i) backward(s, i);
  for (int seg = k - 2; seg >= 0; --seg) {
    const int a = start(seg), b = start(seg + 1);
    tapedRun(s, a, b);
    freeX(s, b);  // the recompute rebuilt x_b; the backward needs g_b, not x_b
    for (int i = b - 1; i >= a; --i) backward(s, i);
  }
  return s;
}

// Property 4: with K segments the peak holds at most K boundaries, one segment's tapes and the gradients:
// (K + ceil(L/K) + 1) M, M the largest single-block peak.
PolicyRule uniformRule() {
  PolicyRule r;
  r.name = "uniform";
  r.params = {{"k", false, "k=K (K >= 1)"}};
  r.make = [](const PolicySpec& p, const ChainCost& c, const std::vector<KeepMask>&) {
    return uniformSchedule(c, p.params.count("k") ? static_cast<int>(intParam(p, "k")) : roundSqrt(c.layers()));
  };
  r.byDefault = [](const ChainCost&) { return std::vector<std::string>{"uniform"}; };
  r.draw = [](const PolicyDraw& d, const ChainCost& c, const std::function<std::vector<KeepMask>()>&) {
    return "uniform:k=" + std::to_string(drawFraction(d.uniformK, c.layers()));
  };
  r.drawComposed = true;
  r.bound = [](const BoundCheck& b) -> std::string {
    if (b.policy.selective) return "";
    const int64_t n = b.cost.layers(), k = intParam(b.policy, "k"), m = b.largestLayerPeak();
    const int64_t bound = (k + (n + k - 1) / k + 1) * m;
    if (b.peakBytes <= bound) return "";
    return "peak " + std::to_string(b.peakBytes) + " bytes > (K + ceil(L/K) + 1) M = (" + std::to_string(k) + " + " +
           std::to_string((n + k - 1) / k) + " + 1) x " + std::to_string(m) + " = " + std::to_string(bound);
  };
  return r;
}

}  // namespace ckpt
