// A schedule: the flat list of instructions one training step executes, over block indices 0..L-1 and
// boundary tensors x_0..x_L (x_i is block i's input, x_L the chain output). Policies emit schedules; the
// validator checks them; the planner walks them without tensors; the executor runs them.
//
// Instructions (text form in brackets):
//  kForward i, keep=none   [forward i]        x_i must be held; produces x_{i+1}, held. Saves nothing.
//  kForward i, keep=tape   [forward i tape]   as above, and stores block i's tape (every context, or those of
//                                             the block's keep mask when the schedule gives one: op-level).
//  kFree i                 [free x i]         drops the executor's handle on x_i (a tape may still share it).
//  kLoss                   [loss]             x_L must be held: loss forward and backward; produces g_L; frees x_L.
//  kBackward i             [backward i]       needs block i's tape and g_{i+1}; rebuilds dropped contexts of the
//                                             tape (op-level recompute), runs the block backward, produces g_i,
//                                             consumes the tape and g_{i+1}.
// The first forward of block i in a step is forward work; any later forward of it is recompute. The step ends
// with g_0 (the input gradient) and nothing else live. Revolve's vocabulary maps onto this: advance = forward
// keep=none, takeshot = keep x_i held (no free), restore = start forwards from a held x_i, firsturn = forward
// tape + loss + backward, youturn = forward tape + backward.
//
// Rules the validator (plan.h) enforces beyond the above: a forward's output x_{i+1} must not already be held
// (free it first), a tape forward must not overwrite a live tape, the loss runs exactly once, a backward's g_i
// must not exist yet; at the end exactly g_0 is live (no boundary, no tape, no other gradient).
// Order of allocations within an instruction, the one sequence planner.cpp and executor.h both follow:
//  kForward  blockForward/simForward from x_i (x_i stays held), its output becomes x_{i+1};
//  kLoss     loss forward (its context shares x_L when the loss saves its input, plus its extras), g_L
//            allocated, then x_L's handle released, then the loss context released;
//  kBackward op-level recompute of the tape's dropped contexts, then the block backward (g_{i+1} consumed).
#pragma once
#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "reference/block.h"

namespace ckpt {

enum class InstrKind { kForward, kFree, kLoss, kBackward };

struct Instr {
  InstrKind kind = InstrKind::kForward;
  int block = 0;      // block index (kForward, kBackward) or boundary index (kFree); unused for kLoss
  bool tape = false;  // kForward only
  bool operator==(const Instr&) const = default;
};

struct Schedule {
  std::string policy;  // the policy string that made it, e.g. "uniform:k=8"
  int layers = 0;
  std::vector<Instr> instrs;
  // Op-level keep masks per block, used by kForward tape; empty = keep every context.
  std::vector<KeepMask> keep;
  const KeepMask& keepFor(int block) const {
    static const KeepMask kAll;
    return keep.empty() ? kAll : keep[static_cast<size_t>(block)];
  }
};

std::string toText(const Instr& i);
std::string toText(const Schedule& s);
nlohmann::json toJson(const Schedule& s);

}  // namespace ckpt
