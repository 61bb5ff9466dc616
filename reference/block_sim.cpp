#include "reference/block_sim.h"

namespace ckpt {

void BytePool::compact() {
  free_.insert(free_.end(), dead_.begin(), dead_.end());
  dead_.clear();
}

namespace {
// Per-call working arrays live in per-thread scratch, so a planner walking 10^6 blocks does not allocate (and
// fragment the heap between the long-lived tapes) per block. Each function takes its own.
std::vector<int>& scratch(int which, size_t n, int fill) {
  thread_local std::vector<int> s[2];
  s[which].assign(n, fill);
  return s[which];
}

const std::vector<int>& lastConsumer(const BlockProgram& p) {
  std::vector<int>& last = scratch(0, p.nodes.size() + 1, -1);
  for (int k = 0; k < p.size(); ++k)
    for (int j : p.nodes[k].inputs) last[j + 1] = k;
  return last;
}
}  // namespace

int simForward(BytePool& pool, const BlockProgram& p, int x, SimTape* tape, const KeepMask& keep) {
  const int n = p.size();
  const auto& last = lastConsumer(p);
  std::vector<int>& vals = scratch(1, n, -1);
  if (tape) {
    tape->contexts.assign(n, {});
    tape->present.assign(n, false);
    tape->kept.assign(n, -1);
    tape->input = -1;
    tape->keep = keep;
  }
  for (int k = 0; k < n; ++k) {
    const NodeCost& c = p.nodes[k];
    const bool save = tape && keeps(keep, k);
    vals[k] = pool.allocate(c.outBytes);
    if (save) {
      auto& ctx = tape->contexts[k];
      tape->present[k] = true;
      if (c.meta.savesInputs)
        for (int j : c.inputs) {
          const int buf = j < 0 ? x : vals[j];
          pool.retain(buf);
          ctx.push_back(buf);
        }
      if (c.meta.savesOutput) {
        pool.retain(vals[k]);
        ctx.push_back(vals[k]);
      }
      if (c.meta.contextExtraBytes > 0) ctx.push_back(pool.allocate(c.meta.contextExtraBytes));
    }
    if (tape && !save) {
      for (int j : c.inputs) {
        if (j < 0) {
          if (tape->input < 0) pool.retain(tape->input = x);
        } else if (keeps(keep, j) && tape->kept[j] < 0) {
          pool.retain(tape->kept[j] = vals[j]);
        }
      }
    }
    for (int j : c.inputs)
      if (j >= 0 && last[j + 1] == k) {
        pool.release(vals[j]);
        vals[j] = -1;
      }
  }
  return vals[n - 1];
}

void simRecomputeDropped(BytePool& pool, const BlockProgram& p, SimTape& tape) {
  const int n = p.size();
  std::vector<int>& lastDropped = scratch(0, n + 1, -1);
  for (int k = 0; k < n; ++k)
    if (!keeps(tape.keep, k))
      for (int j : p.nodes[k].inputs) lastDropped[j + 1] = k;
  std::vector<int>& vals = scratch(1, n, -1);
  for (int k = 0; k < n; ++k) {
    if (keeps(tape.keep, k)) continue;
    const NodeCost& c = p.nodes[k];
    const int out = pool.allocate(c.outBytes);
    auto& ctx = tape.contexts[k];
    tape.present[k] = true;
    if (c.meta.savesInputs)
      for (int j : c.inputs) {
        const int buf = j < 0 ? tape.input : keeps(tape.keep, j) ? tape.kept[j] : vals[j];
        pool.retain(buf);
        ctx.push_back(buf);
      }
    if (c.meta.savesOutput) {
      pool.retain(out);
      ctx.push_back(out);
    }
    if (c.meta.contextExtraBytes > 0) ctx.push_back(pool.allocate(c.meta.contextExtraBytes));
    vals[k] = out;
    for (int j : c.inputs)
      if (j >= 0 && !keeps(tape.keep, j) && lastDropped[j + 1] == k) {
        pool.release(vals[j]);
        vals[j] = -1;
      }
    if (lastDropped[k + 1] < 0) {
      pool.release(vals[k]);
      vals[k] = -1;
    }
  }
  for (int& b : tape.kept)
    if (b >= 0) {
      pool.release(b);
      b = -1;
    }
  if (tape.input >= 0) {
    pool.release(tape.input);
    tape.input = -1;
  }
}

int simBackward(BytePool& pool, const BlockProgram& p, SimTape&& tape, int dy) {
  const int n = p.size();
  std::vector<int>& grads = scratch(0, n + 1, -1);
  grads[n] = dy;
  for (int k = n - 1; k >= 0; --k) {
    const NodeCost& c = p.nodes[k];
    std::vector<int>& din = scratch(1, 0, 0);
    for (int64_t b : c.inputBytes) din.push_back(pool.allocate(b));
    pool.release(grads[k + 1]);
    grads[k + 1] = -1;
    for (int b : tape.contexts[k]) pool.release(b);
    tape.contexts[k].clear();
    tape.present[k] = false;
    for (size_t i = 0; i < c.inputs.size(); ++i) {
      int& g = grads[c.inputs[i] + 1];
      if (g < 0) g = din[i];
      else pool.release(din[i]);
    }
  }
  return grads[0];
}

int64_t droppedForwardFlops(const BlockProgram& p, const KeepMask& keep) {
  int64_t f = 0;
  for (int k = 0; k < p.size(); ++k)
    if (!keeps(keep, k)) f += p.nodes[k].meta.forwardFlops;
  return f;
}

}  // namespace ckpt
