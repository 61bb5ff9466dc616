// The planner: the schedule walked over a BytePool with the block simulator (reference/block_sim.h), in the
// order schedule.h documents for each instruction, which is the order the executor (executor.h) allocates and
// frees tensors in.
#include <deque>
#include <string>
#include <vector>

#include "common/input_error.h"
#include "harness/engine/plan.h"

namespace ckpt {
namespace {

// Live tapes in reusable slots: a schedule that keeps few tapes at a time stays small at 10^6 blocks, and a
// reused SimTape keeps its vectors' capacity, so the walk does not allocate per block.
class TapeSlots {
 public:
  explicit TapeSlots(int blocks) : slotOf_(static_cast<size_t>(blocks), -1) {}
  SimTape& open(int block) {
    int slot;
    if (free_.empty()) {
      slot = static_cast<int>(slots_.size());
      slots_.emplace_back();
    } else {
      slot = free_.back();
      free_.pop_back();
    }
    slotOf_[static_cast<size_t>(block)] = slot;
    return slots_[static_cast<size_t>(slot)];
  }
  SimTape& at(int block) { return slots_[static_cast<size_t>(slotOf_[static_cast<size_t>(block)])]; }
  void close(int block) {
    free_.push_back(slotOf_[static_cast<size_t>(block)]);
    slotOf_[static_cast<size_t>(block)] = -1;
  }

 private:
  std::vector<int> slotOf_;
  std::deque<SimTape> slots_;  // stable addresses while growing
  std::vector<int> free_;
};

// FLOP sums are checked: a block recomputed many times (revolve:slots=1 on a long chain, a schedule file that
// repeats a forward) can take them past 64 bits, and a wrapped count would be read as a small or negative one.
void addFlops(int64_t& to, int64_t v, const Schedule& s) {
  if (__builtin_add_overflow(to, v, &to))
    throw InputError("policy '" + s.policy + "': its planned FLOPs do not fit in 64 bits (more than 2^63)");
}

}  // namespace

double Plan::flopOverhead() const {
  const double base = static_cast<double>(flops.forward) + static_cast<double>(flops.backward);  // no int64 sum to wrap
  return base > 0 ? static_cast<double>(flops.recompute) / base : 0.0;
}

Plan planSchedule(const Schedule& s, const ChainCost& c) {
  validateSchedule(s, c);
  const int n = c.layers();
  BytePool pool;
  std::vector<int> x(static_cast<size_t>(n) + 1, -1);  // boundary buffers x_0..x_L
  std::vector<int> g(static_cast<size_t>(n) + 1, -1);  // gradient buffers g_0..g_L
  std::vector<char> forwarded(static_cast<size_t>(n), 0);
  TapeSlots tapes(n);
  Plan p;
  p.liveAfter.reserve(s.instrs.size());
  x[0] = pool.allocate(c.inputBytes);
  for (const Instr& in : s.instrs) {
    const int i = in.block;
    switch (in.kind) {
      case InstrKind::kForward: {
        const BlockProgram& prog = c.block(i);
        SimTape* tape = in.tape ? &tapes.open(i) : nullptr;
        x[i + 1] = simForward(pool, prog, x[i], tape, s.keepFor(i));
        ++p.forwardEvals;
        addFlops(forwarded[i] ? p.flops.recompute : p.flops.forward, prog.forwardFlops, s);
        forwarded[i] = 1;
        break;
      }
      case InstrKind::kFree:
        pool.release(x[i]);
        x[i] = -1;
        break;
      case InstrKind::kLoss: {
        // Loss forward (its context shares x_L when the loss saves its input, plus its extras), g_L, then
        // x_L's handle and the context are released.
        const LossCost& loss = c.loss;
        std::vector<int> ctx;
        if (loss.meta.savesInputs) {
          pool.retain(x[n]);
          ctx.push_back(x[n]);
        }
        if (loss.meta.contextExtraBytes > 0) ctx.push_back(pool.allocate(loss.meta.contextExtraBytes));
        addFlops(p.flops.forward, loss.meta.forwardFlops, s);
        g[n] = pool.allocate(loss.inBytes);
        addFlops(p.flops.backward, loss.meta.backwardFlops, s);
        pool.release(x[n]);
        x[n] = -1;
        for (int b : ctx) pool.release(b);
        break;
      }
      case InstrKind::kBackward: {
        const BlockProgram& prog = c.block(i);
        SimTape& tape = tapes.at(i);
        addFlops(p.flops.recompute, droppedForwardFlops(prog, tape.keep), s);
        simRecomputeDropped(pool, prog, tape);
        g[i] = simBackward(pool, prog, std::move(tape), g[i + 1]);
        addFlops(p.flops.backward, prog.backwardFlops, s);
        g[i + 1] = -1;
        tapes.close(i);
        break;
      }
    }
    p.liveAfter.push_back(pool.live());
    pool.compact();
  }
  addFlops(p.flops.forward, c.stemForwardFlops, s);
  addFlops(p.flops.backward, c.stemBackwardFlops, s);
  p.peakActivationBytes = pool.peak();
  p.passes = c.microBatches;
  // A step's counts are a pass's times the passes (stepFlops): they must fit too.
  int64_t total = 0;
  for (const int64_t f : {p.flops.forward, p.flops.recompute, p.flops.backward})
    if (__builtin_mul_overflow(f, p.passes, &total))
      throw InputError("policy '" + s.policy + "': its planned FLOPs over " + std::to_string(p.passes) +
                       " micro-batches do not fit in 64 bits (more than 2^63)");
  return p;
}

}  // namespace ckpt
