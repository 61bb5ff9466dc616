// The block runtime, written once for both backends: forward with a tape and an op-level keep mask, the recompute
// of dropped contexts, and the backward, over a runtime R that says what a tensor, a context and a node's op are
// on its backend. reference/block.h instantiates it on the CPU reference's Eigen tensors, device/dblock.h on
// device tensors (HostExec, CudaExec). Eigen-free, so nvcc compiles it for the device. reference/block_sim.h is
// its tensor-free mirror (same allocation order, bytes from OpMeta) that the planner uses.
//
// Allocation order, which block_sim.h reproduces exactly:
//  forward:  for each node: its output (+ context extras when saved) is allocated; then every value whose last
//            consumer this node was is released by the runtime (it lives on if a context or the tape holds it).
//  recompute (op-level, dropped nodes only, in order): as forward, each recomputed node saving its context.
//  backward: for each node in reverse: one fresh gradient per input is allocated; the node's dout and context
//            are released; each input gradient is moved into place or added (+=) into the one already there and
//            released.
//
// A runtime R has (rt is an R&, node a B::nodes element, ins / din spans of R::Tensor):
//   R::Tensor, R::Context, R::Buffer          the backend's tensor (reset(), defined()), op context, module buffer
//   rt.kind(node)                             the reference op's kind(), which BlockEnv's redrawOp / stateOp name
//   rt.forward(node, ins, ctx*, draws, benv)  the op's forward under benv's numerics, ctx null: save nothing
//   rt.backward(node, ctx, dout, din)         the op's backward
//   rt.forwardFlops(node, ins), rt.backwardFlops(node, din)   the reference op's meta() counts
//   rt.addInto(g, d)                          g += d (a value read by two nodes: its gradients summed)
//   rt.buffers(node), rt.snapshot(buf), rt.restore(buf, snap) module state, copied and put back (StateGuard)
#pragma once
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "reference/meter.h"
#include "reference/numerics.h"
#include "reference/rng.h"

namespace ckpt {

// Which nodes keep their context in the tape. Empty = all of them.
using KeepMask = std::vector<bool>;

// True when node k is kept (saves its context) under mask `keep`.
inline bool keeps(const KeepMask& keep, int k) { return keep.empty() || keep[static_cast<size_t>(k)]; }

// What a tape-mode forward leaves for the backward. Contexts of dropped nodes are absent and rebuilt by
// recomputeDropped() from the values the tape kept for that purpose.
template <class Tensor, class Context>
struct BlockTapeOf {
  std::vector<std::optional<Context>> contexts;
  std::vector<Tensor> kept;    // node outputs a dropped node reads
  Tensor input;                // held only when a dropped node reads the block input
  std::vector<RngDraw> draws;  // per node: the draw a random node used, for op-level replay
  KeepMask keep;
};

// Where a block runs: the generator, the step and block index (which make counter-based op keys), and the
// settings a recompute may change. updateState false: the forward leaves module state (BatchNorm's running
// statistics) as it found it, so state moves once per step however often a block is recomputed.
struct BlockEnv {
  Rng* rng = nullptr;
  int step = 0;
  int block = 0;
  bool updateState = true;
  Numerics numerics;
  // A random op whose kind() this names draws from a side stream in this env (sideDraw): a generator the
  // recompute does not restore, as Python's `random` in a hand-written stochastic depth, or noise regenerated
  // instead of saved. Empty: none. Only engine variants set it (harness/mutants/).
  std::string redrawOp;
  // With updateState false, the buffers of the ops whose kind() this names still move: a recompute that records
  // one layer's side effects again (mutant moe-aux-loss-recorded-twice). Empty: none. Only engine variants set it.
  std::string stateOp = {};
};

// The side stream of BlockEnv::redrawOp: the op's own subsequence with the top bit set, which no op key (nor the
// stateful model's subsequence 0) uses, so its numbers are never the ones the first forward drew.
inline RngDraw sideDraw(const Rng& rng, uint64_t opKey) {
  return RngDraw{rng.state().seed, (uint64_t{1} << 63) | opKey, 0};
}

// A node's DrawSource under `benv`: NodeDraws, except that an op named by redrawOp is handed the side stream (its
// normal reservation still happens, so the generator and every other op draw as before).
class EnvDraws final : public DrawSource {
 public:
  EnvDraws(const BlockEnv& benv, const std::string& opKind, int node, const RngDraw* replay, RngDraw* record)
      : inner_(benv.rng, makeOpKey(benv.step, benv.block, node), replay, record),
        side_(!benv.redrawOp.empty() && benv.redrawOp == opKind),
        rng_(benv.rng),
        opKey_(makeOpKey(benv.step, benv.block, node)) {}
  RngDraw draw(int64_t n) override {
    const RngDraw d = inner_.draw(n);
    return side_ ? sideDraw(*rng_, opKey_) : d;
  }

 private:
  NodeDraws inner_;
  bool side_;
  Rng* rng_;
  uint64_t opKey_;
};

// Keeps module state from moving: copies the buffers of the given nodes' ops and puts them back when it goes
// out of scope (the fix frameworks apply to the BatchNorm-updated-twice bug, PyTorch issue 96136). Ops update
// their buffers on every training forward; whether that sticks is the runtime's decision, not the op's.
template <class R>
class StateGuard {
 public:
  template <class B>
  StateGuard(R& rt, B& b, bool active, const std::vector<bool>& nodes) : rt_(&rt) {
    if (!active) return;
    for (int k = 0; k < b.size(); ++k)
      if (nodes.empty() || nodes[static_cast<size_t>(k)])
        for (auto* buf : rt.buffers(b.nodes[static_cast<size_t>(k)])) saved_.push_back({buf, rt.snapshot(*buf)});
  }
  ~StateGuard() {
    for (auto& [buf, snap] : saved_) rt_->restore(*buf, snap);
  }
  StateGuard(const StateGuard&) = delete;
  StateGuard& operator=(const StateGuard&) = delete;

 private:
  using Buffer = typename R::Buffer;
  R* rt_;
  std::vector<std::pair<Buffer*, decltype(std::declval<R&>().snapshot(std::declval<Buffer&>()))>> saved_;
};

// The node (per value id + 1) that consumes each value last in forward order; -1 if none.
template <class B>
std::vector<int> lastConsumers(const B& b) {
  std::vector<int> last(b.nodes.size() + 1, -1);
  for (int k = 0; k < b.size(); ++k)
    for (int j : b.nodes[static_cast<size_t>(k)].inputs) last[static_cast<size_t>(j + 1)] = k;
  return last;
}

// Every node whose op kind is not BlockEnv::stateOp's (and, with `dropped`, that the tape dropped): the nodes a
// StateGuard holds still.
template <class R, class B>
std::vector<bool> guardedNodes(R& rt, const B& b, const BlockEnv& benv, const KeepMask* dropped) {
  std::vector<bool> g(static_cast<size_t>(b.size()));
  for (int k = 0; k < b.size(); ++k)
    g[static_cast<size_t>(k)] =
        (!dropped || !keeps(*dropped, k)) && rt.kind(b.nodes[static_cast<size_t>(k)]) != benv.stateOp;
  return g;
}

// Runs the block forward. tape == nullptr: nothing is saved. Otherwise contexts of kept nodes are saved and
// the values dropped nodes will need are kept.
template <class R, class B>
typename R::Tensor blockForward(R& rt, B& b, const typename R::Tensor& x,
                                BlockTapeOf<typename R::Tensor, typename R::Context>* tape, const KeepMask& keep,
                                const BlockEnv& benv) {
  using Tensor = typename R::Tensor;
  const int n = b.size();
  const auto at = [](int i) { return static_cast<size_t>(i); };
  const auto last = lastConsumers(b);
  std::vector<Tensor> vals(at(n));
  if (tape) {
    tape->contexts.assign(at(n), std::nullopt);
    tape->kept.assign(at(n), Tensor());
    tape->draws.assign(at(n), RngDraw{});
    tape->keep = keep;
    tape->input.reset();
  }
  ActivationMeter* meter = currentMeter();
  const StateGuard<R> state(rt, b, !benv.updateState, guardedNodes(rt, b, benv, nullptr));
  for (int k = 0; k < n; ++k) {
    auto& node = b.nodes[at(k)];
    std::vector<Tensor> ins;
    for (int j : node.inputs) ins.push_back(j < 0 ? x : vals[at(j)]);
    EnvDraws draws(benv, rt.kind(node), k, nullptr, tape ? &tape->draws[at(k)] : nullptr);
    const bool save = tape && keeps(keep, k);
    typename R::Context ctx;
    vals[at(k)] = rt.forward(node, std::span<const Tensor>(ins), save ? &ctx : nullptr, draws, benv);
    if (meter) meter->countFlops(rt.forwardFlops(node, std::span<const Tensor>(ins)));
    if (save) tape->contexts[at(k)] = std::move(ctx);
    ins.clear();
    // A dropped node will need the values it reads; the tape keeps those that no recompute rebuilds.
    if (tape && !save) {
      for (int j : node.inputs) {
        if (j < 0) tape->input = x;
        else if (keeps(keep, j)) tape->kept[at(j)] = vals[at(j)];
      }
    }
    for (int j : node.inputs)
      if (j >= 0 && last[at(j + 1)] == k) vals[at(j)].reset();
  }
  Tensor y = std::move(vals[at(n - 1)]);
  return y;
}

// Rebuilds the contexts of the nodes the tape dropped, replaying each random node's recorded draw and never
// moving module state (StateGuard). Afterwards the tape holds only contexts.
template <class R, class B>
void recomputeDropped(R& rt, B& b, BlockTapeOf<typename R::Tensor, typename R::Context>& tape, const BlockEnv& benv) {
  using Tensor = typename R::Tensor;
  const int n = b.size();
  const auto at = [](int i) { return static_cast<size_t>(i); };
  std::vector<int> lastDropped(at(n + 1), -1);
  for (int k = 0; k < n; ++k)
    if (!keeps(tape.keep, k))
      for (int j : b.nodes[at(k)].inputs) lastDropped[at(j + 1)] = k;
  std::vector<Tensor> vals(at(n));
  ActivationMeter* meter = currentMeter();
  const StateGuard<R> state(rt, b, true, guardedNodes(rt, b, benv, &tape.keep));
  for (int k = 0; k < n; ++k) {
    if (keeps(tape.keep, k)) continue;
    auto& node = b.nodes[at(k)];
    std::vector<Tensor> ins;
    for (int j : node.inputs) ins.push_back(j < 0 ? tape.input : keeps(tape.keep, j) ? tape.kept[at(j)] : vals[at(j)]);
    EnvDraws draws(benv, rt.kind(node), k, &tape.draws[at(k)], nullptr);
    typename R::Context ctx;
    vals[at(k)] = rt.forward(node, std::span<const Tensor>(ins), &ctx, draws, benv);
    if (meter) meter->countFlops(rt.forwardFlops(node, std::span<const Tensor>(ins)));
    tape.contexts[at(k)] = std::move(ctx);
    ins.clear();
    for (int j : node.inputs)
      if (j >= 0 && !keeps(tape.keep, j) && lastDropped[at(j + 1)] == k) vals[at(j)].reset();
    if (lastDropped[at(k + 1)] < 0) vals[at(k)].reset();  // no later recompute reads it; a context may still hold it
  }
  for (auto& t : tape.kept) t.reset();
  tape.input.reset();
}

// Backward through a block whose tape holds every context. Consumes the tape and dy; returns dx.
template <class R, class B>
typename R::Tensor blockBackward(R& rt, B& b, BlockTapeOf<typename R::Tensor, typename R::Context>&& tape,
                                 typename R::Tensor&& dy) {
  using Tensor = typename R::Tensor;
  const int n = b.size();
  const auto at = [](int i) { return static_cast<size_t>(i); };
  std::vector<Tensor> grads(at(n + 1));  // index value id + 1
  grads[at(n)] = std::move(dy);
  ActivationMeter* meter = currentMeter();
  for (int k = n - 1; k >= 0; --k) {
    auto& node = b.nodes[at(k)];
    std::vector<Tensor> din(node.inputs.size());
    rt.backward(node, *tape.contexts[at(k)], grads[at(k + 1)], std::span<Tensor>(din));
    if (meter) meter->countFlops(rt.backwardFlops(node, std::span<const Tensor>(din)));
    grads[at(k + 1)].reset();
    tape.contexts[at(k)].reset();
    for (size_t i = 0; i < node.inputs.size(); ++i) {
      Tensor& g = grads[at(node.inputs[i] + 1)];
      if (!g.defined()) {
        g = std::move(din[i]);
      } else {
        rt.addInto(g, din[i]);
        din[i].reset();
      }
    }
  }
  return std::move(grads[0]);
}

}  // namespace ckpt
