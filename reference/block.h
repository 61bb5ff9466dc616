// A block: a short op program in SSA form. Node k's inputs are value ids: -1 is the block input, j >= 0 the
// output of node j; the block output is the last node's output. The runtime below is the one place that runs a
// block, for the reference trainer and for the checkpointing executor alike; reference/block_sim.h is its
// tensor-free mirror (same allocation order, bytes from OpMeta) that the planner uses.
//
// Allocation order, which block_sim.h reproduces exactly:
//  forward:  for each node: its output (+ context extras when saved) is allocated; then every value whose last
//            consumer this node was is released by the runtime (it lives on if a context or the tape holds it).
//  recompute (op-level, dropped nodes only, in order): as forward, each recomputed node saving its context.
//  backward: for each node in reverse: one fresh gradient per input is allocated; the node's dout and context
//            are released; each input gradient is moved into place or added (+=) into the one already there and
//            released.
#pragma once
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "reference/op.h"

namespace ckpt {

template <class T>
struct Node {
  std::string name;
  std::unique_ptr<Op<T>> op;
  std::vector<int> inputs;
};

template <class T>
struct Block {
  std::string kind;
  std::vector<Node<T>> nodes;
  int size() const { return static_cast<int>(nodes.size()); }
};

// Which nodes keep their context in the tape. Empty = all of them.
using KeepMask = std::vector<bool>;

// What a tape-mode forward leaves for the backward. Contexts of dropped nodes are absent and rebuilt by
// recomputeDropped() from the values the tape kept for that purpose.
template <class T>
struct BlockTape {
  std::vector<std::optional<Context<T>>> contexts;
  std::vector<Tensor<T>> kept;  // node outputs a dropped node reads
  Tensor<T> input;              // held only when a dropped node reads the block input
  std::vector<RngDraw> draws;   // per node: the draw a random node used, for op-level replay
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
inline RngDraw sideDraw(const Rng& rng, uint64_t opKey) { return RngDraw{rng.state().seed, (uint64_t{1} << 63) | opKey, 0}; }

// A node's DrawSource under `benv`: NodeDraws, except that an op named by redrawOp is handed the side stream (its
// normal reservation still happens, so the generator and every other op draw as before).
class EnvDraws final : public DrawSource {
 public:
  template <class O>
  EnvDraws(const BlockEnv& benv, const O& op, int node, const RngDraw* replay, RngDraw* record)
      : inner_(benv.rng, makeOpKey(benv.step, benv.block, node), replay, record),
        side_(!benv.redrawOp.empty() && benv.redrawOp == op.kind()),
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
template <class T>
class StateGuard {
 public:
  StateGuard(Block<T>& b, bool active, const std::vector<bool>& nodes = {}) {
    if (!active) return;
    for (int k = 0; k < b.size(); ++k)
      if (nodes.empty() || nodes[static_cast<size_t>(k)])
        for (Buffer<T>* buf : b.nodes[static_cast<size_t>(k)].op->buffers()) saved_.push_back({buf, buf->value});
  }
  ~StateGuard() {
    for (auto& [buf, value] : saved_) buf->value = value;
  }
  StateGuard(const StateGuard&) = delete;
  StateGuard& operator=(const StateGuard&) = delete;

 private:
  std::vector<std::pair<Buffer<T>*, Mat<T>>> saved_;
};

template <class T>
std::vector<Shape> inputShapes(const Node<T>& n, const std::vector<Shape>& values, Shape x) {
  std::vector<Shape> s;
  for (int j : n.inputs) s.push_back(j < 0 ? x : values[j]);
  return s;
}

// The node (per value id + 1) that consumes each value last in forward order; -1 if none.
template <class T>
std::vector<int> lastConsumers(const Block<T>& b) {
  std::vector<int> last(b.nodes.size() + 1, -1);
  for (int k = 0; k < b.size(); ++k)
    for (int j : b.nodes[k].inputs) last[j + 1] = k;
  return last;
}

// True when node k is kept (saves its context) under mask `keep`.
inline bool keeps(const KeepMask& keep, int k) { return keep.empty() || keep[k]; }

// Runs the block forward. tape == nullptr: nothing is saved. Otherwise contexts of kept nodes are saved and
// the values dropped nodes will need are kept.
template <class T>
Tensor<T> blockForward(Block<T>& b, const Tensor<T>& x, BlockTape<T>* tape, const KeepMask& keep,
                       const BlockEnv& benv) {
  const int n = b.size();
  const auto last = lastConsumers(b);
  std::vector<Tensor<T>> vals(n);
  if (tape) {
    tape->contexts.assign(n, std::nullopt);
    tape->kept.assign(n, Tensor<T>());
    tape->draws.assign(n, RngDraw{});
    tape->keep = keep;
    tape->input.reset();
  }
  ActivationMeter* meter = currentMeter();
  std::vector<bool> guarded(static_cast<size_t>(n), true);
  for (int k = 0; k < n; ++k) guarded[static_cast<size_t>(k)] = b.nodes[k].op->kind() != benv.stateOp;
  const StateGuard<T> state(b, !benv.updateState, guarded);
  for (int k = 0; k < n; ++k) {
    Node<T>& node = b.nodes[k];
    std::vector<Tensor<T>> ins;
    for (int j : node.inputs) ins.push_back(j < 0 ? x : vals[j]);
    EnvDraws draws(benv, *node.op, k, nullptr, tape ? &tape->draws[k] : nullptr);
    const OpEnv env{&draws, benv.numerics};
    const bool save = tape && keeps(keep, k);
    Context<T> ctx;
    ctx.numerics = benv.numerics;
    vals[k] = node.op->forward(ins, save ? &ctx : nullptr, env);
    if (meter) {
      std::vector<Shape> shapes;
      for (auto& t : ins) shapes.push_back({t.rows(), t.cols()});
      meter->countFlops(node.op->meta(shapes).forwardFlops);
    }
    if (save) tape->contexts[k] = std::move(ctx);
    ins.clear();
    // A dropped node will need the values it reads; the tape keeps those that no recompute rebuilds.
    if (tape && !save) {
      for (int j : node.inputs) {
        if (j < 0) tape->input = x;
        else if (keeps(keep, j)) tape->kept[j] = vals[j];
      }
    }
    for (int j : node.inputs)
      if (j >= 0 && last[j + 1] == k) vals[j].reset();
  }
  Tensor<T> y = std::move(vals[n - 1]);
  return y;
}

// Rebuilds the contexts of the nodes the tape dropped, replaying each random node's recorded draw and never
// moving module state (StateGuard). Afterwards the tape holds only contexts.
template <class T>
void recomputeDropped(Block<T>& b, BlockTape<T>& tape, const BlockEnv& benv) {
  const int n = b.size();
  std::vector<int> lastDropped(n + 1, -1);
  for (int k = 0; k < n; ++k)
    if (!keeps(tape.keep, k))
      for (int j : b.nodes[k].inputs) lastDropped[j + 1] = k;
  std::vector<Tensor<T>> vals(n);
  ActivationMeter* meter = currentMeter();
  std::vector<bool> dropped(static_cast<size_t>(n));
  for (int k = 0; k < n; ++k)
    dropped[static_cast<size_t>(k)] = !keeps(tape.keep, k) && b.nodes[k].op->kind() != benv.stateOp;
  const StateGuard<T> state(b, true, dropped);
  for (int k = 0; k < n; ++k) {
    if (keeps(tape.keep, k)) continue;
    Node<T>& node = b.nodes[k];
    std::vector<Tensor<T>> ins;
    for (int j : node.inputs)
      ins.push_back(j < 0 ? tape.input : keeps(tape.keep, j) ? tape.kept[j] : vals[j]);
    EnvDraws draws(benv, *node.op, k, &tape.draws[k], nullptr);
    const OpEnv env{&draws, benv.numerics};
    Context<T> ctx;
    ctx.numerics = benv.numerics;
    vals[k] = node.op->forward(ins, &ctx, env);
    if (meter) {
      std::vector<Shape> shapes;
      for (auto& t : ins) shapes.push_back({t.rows(), t.cols()});
      meter->countFlops(node.op->meta(shapes).forwardFlops);
    }
    tape.contexts[k] = std::move(ctx);
    ins.clear();
    for (int j : node.inputs)
      if (j >= 0 && !keeps(tape.keep, j) && lastDropped[j + 1] == k) vals[j].reset();
    if (lastDropped[k + 1] < 0) vals[k].reset();  // no later recompute reads it; a context may still hold it
  }
  for (auto& t : tape.kept) t.reset();
  tape.input.reset();
}

// Backward through a block whose tape holds every context. Consumes the tape and dy; returns dx.
template <class T>
Tensor<T> blockBackward(Block<T>& b, BlockTape<T>&& tape, Tensor<T>&& dy) {
  const int n = b.size();
  std::vector<Tensor<T>> grads(n + 1);  // index value id + 1
  grads[n] = std::move(dy);
  ActivationMeter* meter = currentMeter();
  for (int k = n - 1; k >= 0; --k) {
    Node<T>& node = b.nodes[k];
    Context<T>& ctx = *tape.contexts[k];
    std::vector<Tensor<T>> din(node.inputs.size());
    node.op->backward(ctx, grads[k + 1], din);
    if (meter) {
      std::vector<Shape> shapes;
      for (auto& t : din) shapes.push_back({t.rows(), t.cols()});
      meter->countFlops(node.op->meta(shapes).backwardFlops);
    }
    grads[k + 1].reset();
    tape.contexts[k].reset();
    for (size_t i = 0; i < node.inputs.size(); ++i) {
      Tensor<T>& g = grads[node.inputs[i] + 1];
      if (!g.defined()) {
        g = std::move(din[i]);
      } else {
        g.map() += din[i].map();
        din[i].reset();
      }
    }
  }
  return std::move(grads[0]);
}

}  // namespace ckpt
