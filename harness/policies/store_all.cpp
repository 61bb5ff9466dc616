// store-all: the reference trainer's schedule. Every block's whole tape is stored on the way forward and the
// executor drops its own handle on each boundary as soon as the next exists (a tape shares x_i when its first
// op saves its input), so the bytes are exactly those of reference/trainer.h.
#include "harness/engine/policy.h"

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

}  // namespace ckpt
