// The validator: walks a schedule tracking only what is held (boundaries x_i, tapes, gradients g_i) and rejects
// the first instruction that could not run, so the planner and the executor may assume a well-formed schedule.
#include <vector>

#include "common/input_error.h"
#include "harness/engine/plan.h"

namespace ckpt {
namespace {

[[noreturn]] void reject(size_t index, const Instr& in, const std::string& why) {
  throw InputError("schedule instruction " + std::to_string(index) + " (" + toText(in) + "): " + why);
}

std::string x(int i) { return "x_" + std::to_string(i); }
std::string g(int i) { return "g_" + std::to_string(i); }

void checkShape(const Schedule& s, const ChainCost& c) {
  const int n = c.layers();
  if (s.layers != n)
    throw InputError("schedule: made for " + std::to_string(s.layers) + " layers, the chain has " + std::to_string(n));
  if (s.keep.empty()) return;
  if (static_cast<int>(s.keep.size()) != n)
    throw InputError("schedule: " + std::to_string(s.keep.size()) + " keep masks for " + std::to_string(n) + " blocks");
  for (int b = 0; b < n; ++b) {
    const size_t want = static_cast<size_t>(c.block(b).size());
    const size_t got = s.keep[static_cast<size_t>(b)].size();
    if (got != 0 && got != want)
      throw InputError("schedule: keep mask of block " + std::to_string(b) + " has " + std::to_string(got) +
                       " entries, the block has " + std::to_string(want) + " nodes");
  }
}

}  // namespace

void validateSchedule(const Schedule& s, const ChainCost& c) {
  checkShape(s, c);
  const int n = c.layers();
  std::vector<char> held(static_cast<size_t>(n) + 1, 0);  // x_0..x_L
  std::vector<char> tape(static_cast<size_t>(n), 0);
  std::vector<char> grad(static_cast<size_t>(n) + 1, 0);  // g_0..g_L
  held[0] = 1;                                            // the step starts with the chain input
  bool lossRan = false;
  for (size_t k = 0; k < s.instrs.size(); ++k) {
    const Instr& in = s.instrs[k];
    const int i = in.block;
    switch (in.kind) {
      case InstrKind::kForward:
        if (i < 0 || i >= n) reject(k, in, "block " + std::to_string(i) + " is outside [0, " + std::to_string(n) + ")");
        if (!held[i]) reject(k, in, "its input " + x(i) + " is not held");
        if (held[i + 1]) reject(k, in, "its output " + x(i + 1) + " is already held (free it first)");
        if (in.tape && tape[i])
          reject(k, in, "block " + std::to_string(i) + "'s tape is still live and would be overwritten");
        held[i + 1] = 1;
        if (in.tape) tape[i] = 1;
        break;
      case InstrKind::kFree:
        if (i < 0 || i > n)
          reject(k, in, "boundary " + std::to_string(i) + " is outside [0, " + std::to_string(n) + "]");
        if (!held[i]) reject(k, in, x(i) + " is not held (freed twice, or never produced)");
        held[i] = 0;
        break;
      case InstrKind::kLoss:
        if (lossRan) reject(k, in, "the loss already ran in this step");
        if (!held[n]) reject(k, in, "the chain output " + x(n) + " is not held");
        held[n] = 0;
        grad[n] = 1;
        lossRan = true;
        break;
      case InstrKind::kBackward:
        if (i < 0 || i >= n) reject(k, in, "block " + std::to_string(i) + " is outside [0, " + std::to_string(n) + ")");
        if (!tape[i]) reject(k, in, "block " + std::to_string(i) + " has no tape");
        if (!grad[i + 1]) reject(k, in, "its output gradient " + g(i + 1) + " does not exist");
        if (grad[i]) reject(k, in, "its input gradient " + g(i) + " already exists");
        tape[i] = 0;
        grad[i + 1] = 0;
        grad[i] = 1;
        break;
    }
  }
  const std::string end = "schedule end (after " + std::to_string(s.instrs.size()) + " instructions): ";
  if (!lossRan) throw InputError(end + "the loss never ran");
  for (int i = 0; i <= n; ++i)
    if (held[i]) throw InputError(end + x(i) + " is still held");
  for (int i = 0; i < n; ++i)
    if (tape[i]) throw InputError(end + "block " + std::to_string(i) + "'s tape is still live");
  for (int i = 1; i <= n; ++i)
    if (grad[i]) throw InputError(end + g(i) + " is still live");
  if (!grad[0]) throw InputError(end + "no input gradient " + g(0) + " (backward 0 never ran)");
}

}  // namespace ckpt
