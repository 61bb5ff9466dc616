// The two instruction patterns recursive, revolve and optimal are made of, in one place so that the optimal
// DP's memory model (optimal.cpp) describes exactly what the other two emit:
//  advance(a, b)  from a held x_a: forward a..b-1 keeping nothing; x_a stays held (a checkpoint), every interior
//                 boundary is freed as soon as the next exists, x_b is left held.
//  tape(i)        forward i with its tape from a held x_i, then free x_i (the tape shares it if it needs it).
//  turn(i)        tape(i), then the loss when this is the step's first turn of the last block (revolve's
//                 firsturn) or else free x_{i+1} (the backward needs g_{i+1}, not x_{i+1}); then backward i.
// A block whose tape() ran is backed through later with backward(i).
#pragma once
#include <cstdint>
#include <string>

#include "common/input_error.h"
#include "harness/engine/schedule.h"

namespace ckpt {

// Instructions of a schedule of these patterns with `forwards` block forwards over `layers` blocks: every
// forward's output is freed once (x_L by the loss instead) and x_0 once more, one backward per block, one loss.
// Refuses schedules too long to hold (12 bytes an instruction) or to plan in reasonable time.
inline int64_t scheduleLength(int64_t forwards, int64_t layers, const std::string& policy) {
  constexpr int64_t kMost = int64_t{1} << 28;
  if (forwards > kMost)
    throw InputError("policy '" + policy + "': " + std::to_string(forwards) + " forward evaluations over " +
                     std::to_string(layers) + " layers; a schedule over 2^28 instructions (3 GiB) is not built");
  const int64_t n = 2 * forwards + layers + 1;
  if (n > kMost)
    throw InputError("policy '" + policy + "': " + std::to_string(n) + " instructions over " + std::to_string(layers) +
                     " layers; a schedule over 2^28 instructions (3 GiB) is not built");
  return n;
}

class TurnWriter {
 public:
  explicit TurnWriter(Schedule& s) : s_(s) {}

  void advance(int a, int b) {
    for (int i = a; i < b; ++i) {
      s_.instrs.push_back({InstrKind::kForward, i, false});
      if (i > a) free(i);
    }
  }
  void tape(int i) {
    s_.instrs.push_back({InstrKind::kForward, i, true});
    free(i);
  }
  void loss() {
    s_.instrs.push_back({InstrKind::kLoss, 0, false});
    lossDone_ = true;
  }
  void backward(int i) { s_.instrs.push_back({InstrKind::kBackward, i, false}); }
  void turn(int i) {
    tape(i);
    if (i == s_.layers - 1 && !lossDone_) loss();
    else free(i + 1);
    backward(i);
  }

 private:
  void free(int i) { s_.instrs.push_back({InstrKind::kFree, i, false}); }

  Schedule& s_;
  bool lossDone_ = false;
};

}  // namespace ckpt
