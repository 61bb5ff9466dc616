// The block runtime on a device executor: reference/block.h line for line (same SSA program, same allocation
// and release order, same op keys, same op-level replay), over DTensor and DOp. Keep the two in step: a change
// of allocation order there must be made here too, or measured device peaks stop matching the planner
// (tests/cuda_host_runtime_test.cpp compares them).
#pragma once
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "reference/cuda/dops.h"
#include "reference/cuda/dtape.h"

namespace ckpt::gpu {

template <class T, class X>
struct DNode {
  std::string name;
  std::unique_ptr<DOp<T, X>> op;
  std::vector<int> inputs;
  int64_t forwardFlops = 0;   // the reference op's meta() for the chain's shapes
  int64_t backwardFlops = 0;
  std::string opKind;  // the reference op's kind(), which engine variants single ops out by
};

template <class T, class X>
struct DBlock {
  std::string kind;
  std::vector<DNode<T, X>> nodes;
  int size() const { return static_cast<int>(nodes.size()); }
};

template <class T, class X>
std::vector<int> deviceLastConsumers(const DBlock<T, X>& b) {
  std::vector<int> last(b.nodes.size() + 1, -1);
  for (int k = 0; k < b.size(); ++k)
    for (int j : b.nodes[static_cast<size_t>(k)].inputs) last[static_cast<size_t>(j + 1)] = k;
  return last;
}

// reference/block.h's StateGuard: copies the buffers of the given nodes' ops (device to device, untracked) and
// puts them back when it goes out of scope, so a recompute leaves module state as it found it. The runtime leaves
// out the nodes of DBlockEnv::stateOp's kind, as reference/block.h does for BlockEnv::stateOp.
template <class T, class X>
class DStateGuard {
 public:
  DStateGuard(X& x, DBlock<T, X>& b, bool active, const std::vector<bool>& nodes = {}) : x_(&x) {
    if (!active) return;
    for (int k = 0; k < b.size(); ++k)
      if (nodes.empty() || nodes[static_cast<size_t>(k)])
        for (DBuffer<T>* buf : b.nodes[static_cast<size_t>(k)].op->buffers()) {
          DTensor<T> copy = DTensor<T>::untracked(x.pool(), buf->value.rows(), buf->value.cols());
          x.copy(copy.data(), buf->value.data(), copy.size());
          saved_.push_back({buf, std::move(copy)});
        }
  }
  ~DStateGuard() {
    for (auto& [buf, copy] : saved_) x_->copy(buf->value.data(), copy.data(), copy.size());
  }
  DStateGuard(const DStateGuard&) = delete;
  DStateGuard& operator=(const DStateGuard&) = delete;

 private:
  X* x_;
  std::vector<std::pair<DBuffer<T>*, DTensor<T>>> saved_;
};

// reference/block.h's EnvDraws: node k's NodeDraws, except that an op whose kind() is DBlockEnv::redrawOp is handed
// the side stream (reference/block.h's sideDraw: the generator's seed, the op key with the top bit set, offset 0)
// after its normal reservation or replay, so the generator and every other op draw as they would without it.
class DEnvDraws final : public DrawSource {
 public:
  DEnvDraws(const DBlockEnv& benv, const std::string& opKind, int node, const RngDraw* replay, RngDraw* record)
      : inner_(benv.rng, makeOpKey(benv.step, benv.block, node), replay, record),
        side_(!benv.redrawOp.empty() && benv.redrawOp == opKind),
        rng_(benv.rng),
        opKey_(makeOpKey(benv.step, benv.block, node)) {}
  RngDraw draw(int64_t n) override {
    const RngDraw d = inner_.draw(n);
    return side_ ? RngDraw{rng_->state().seed, (uint64_t{1} << 63) | opKey_, 0} : d;
  }

 private:
  NodeDraws inner_;
  bool side_;
  Rng* rng_;
  uint64_t opKey_;
};

// The env node k's op runs under. The op records in its context what its backward depends on (bf16Inputs).
inline DEnv nodeEnv(DrawSource& draws, const DBlockEnv& benv) {
  return DEnv{&draws, benv.erfGelu, benv.bf16Matmul, benv.bf16Inputs};
}

template <class T, class X>
DTensor<T> deviceBlockForward(X& exec, DBlock<T, X>& b, const DTensor<T>& x, DBlockTape<T>* tape,
                              const DKeepMask& keep, const DBlockEnv& benv) {
  const int n = b.size();
  const auto last = deviceLastConsumers(b);
  std::vector<DTensor<T>> vals(static_cast<size_t>(n));
  if (tape) {
    tape->contexts.assign(static_cast<size_t>(n), std::nullopt);
    tape->kept.assign(static_cast<size_t>(n), DTensor<T>());
    tape->draws.assign(static_cast<size_t>(n), RngDraw{});
    tape->keep = keep;
    tape->input.reset();
  }
  ActivationMeter* meter = currentMeter();
  std::vector<bool> guarded(static_cast<size_t>(n));
  for (int k = 0; k < n; ++k) guarded[static_cast<size_t>(k)] = b.nodes[static_cast<size_t>(k)].opKind != benv.stateOp;
  const DStateGuard<T, X> state(exec, b, !benv.updateState, guarded);
  for (int k = 0; k < n; ++k) {
    DNode<T, X>& node = b.nodes[static_cast<size_t>(k)];
    std::vector<DTensor<T>> ins;
    for (int j : node.inputs) ins.push_back(j < 0 ? x : vals[static_cast<size_t>(j)]);
    DEnvDraws draws(benv, node.opKind, k, nullptr, tape ? &tape->draws[static_cast<size_t>(k)] : nullptr);
    const DEnv env = nodeEnv(draws, benv);
    const bool save = tape && keepsNode(keep, k);
    DContext<T> ctx;
    vals[static_cast<size_t>(k)] = node.op->forward(ins, save ? &ctx : nullptr, env);
    if (meter) meter->countFlops(node.forwardFlops);
    if (save) tape->contexts[static_cast<size_t>(k)] = std::move(ctx);
    ins.clear();
    if (tape && !save) {
      for (int j : node.inputs) {
        if (j < 0) tape->input = x;
        else if (keepsNode(keep, j)) tape->kept[static_cast<size_t>(j)] = vals[static_cast<size_t>(j)];
      }
    }
    for (int j : node.inputs)
      if (j >= 0 && last[static_cast<size_t>(j + 1)] == k) vals[static_cast<size_t>(j)].reset();
  }
  DTensor<T> y = std::move(vals[static_cast<size_t>(n - 1)]);
  return y;
}

template <class T, class X>
void deviceRecomputeDropped(X& exec, DBlock<T, X>& b, DBlockTape<T>& tape, const DBlockEnv& benv) {
  const int n = b.size();
  std::vector<int> lastDropped(static_cast<size_t>(n + 1), -1);
  for (int k = 0; k < n; ++k)
    if (!keepsNode(tape.keep, k))
      for (int j : b.nodes[static_cast<size_t>(k)].inputs) lastDropped[static_cast<size_t>(j + 1)] = k;
  std::vector<DTensor<T>> vals(static_cast<size_t>(n));
  ActivationMeter* meter = currentMeter();
  std::vector<bool> dropped(static_cast<size_t>(n));
  for (int k = 0; k < n; ++k)
    dropped[static_cast<size_t>(k)] = !keepsNode(tape.keep, k) && b.nodes[static_cast<size_t>(k)].opKind != benv.stateOp;
  const DStateGuard<T, X> state(exec, b, true, dropped);
  for (int k = 0; k < n; ++k) {
    if (keepsNode(tape.keep, k)) continue;
    DNode<T, X>& node = b.nodes[static_cast<size_t>(k)];
    std::vector<DTensor<T>> ins;
    for (int j : node.inputs)
      ins.push_back(j < 0 ? tape.input
                          : keepsNode(tape.keep, j) ? tape.kept[static_cast<size_t>(j)] : vals[static_cast<size_t>(j)]);
    DEnvDraws draws(benv, node.opKind, k, &tape.draws[static_cast<size_t>(k)], nullptr);
    const DEnv env = nodeEnv(draws, benv);
    DContext<T> ctx;
    vals[static_cast<size_t>(k)] = node.op->forward(ins, &ctx, env);
    if (meter) meter->countFlops(node.forwardFlops);
    tape.contexts[static_cast<size_t>(k)] = std::move(ctx);
    ins.clear();
    for (int j : node.inputs)
      if (j >= 0 && !keepsNode(tape.keep, j) && lastDropped[static_cast<size_t>(j + 1)] == k)
        vals[static_cast<size_t>(j)].reset();
    if (lastDropped[static_cast<size_t>(k + 1)] < 0) vals[static_cast<size_t>(k)].reset();
  }
  for (auto& t : tape.kept) t.reset();
  tape.input.reset();
}

template <class T, class X>
DTensor<T> deviceBlockBackward(X& x, DBlock<T, X>& b, DBlockTape<T>&& tape, DTensor<T>&& dy) {
  const int n = b.size();
  std::vector<DTensor<T>> grads(static_cast<size_t>(n + 1));
  grads[static_cast<size_t>(n)] = std::move(dy);
  ActivationMeter* meter = currentMeter();
  for (int k = n - 1; k >= 0; --k) {
    DNode<T, X>& node = b.nodes[static_cast<size_t>(k)];
    DContext<T>& ctx = *tape.contexts[static_cast<size_t>(k)];
    std::vector<DTensor<T>> din(node.inputs.size());
    node.op->backward(ctx, grads[static_cast<size_t>(k + 1)], din);
    if (meter) meter->countFlops(node.backwardFlops);
    grads[static_cast<size_t>(k + 1)].reset();
    tape.contexts[static_cast<size_t>(k)].reset();
    for (size_t i = 0; i < node.inputs.size(); ++i) {
      DTensor<T>& g = grads[static_cast<size_t>(node.inputs[i] + 1)];
      if (!g.defined()) {
        g = std::move(din[i]);
      } else {
        x.launch(g.size(), AccumulateInto<T>{g.data(), din[i].data()});
        din[i].reset();
      }
    }
  }
  return std::move(grads[0]);
}

}  // namespace ckpt::gpu
