// A block on a device executor X: its nodes' device ops and the block runtime's trait over them (DeviceRuntime),
// so the device runs reference/block_runtime.h, the CPU reference's own runtime (same SSA program, allocation and
// release order, op keys, op-level replay and state guard). Measured device peaks therefore match the planner's
// by construction (tests/cuda_host_runtime_test.cpp checks).
#pragma once
#include <cstdint>
#include <memory>
#include <span>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "device/dops.h"
#include "device/dtape.h"

namespace ckpt::gpu {

template <class T, class X>
struct DNode {
  std::string name;
  std::unique_ptr<DOp<T, X>> op;
  std::vector<int> inputs;
  int64_t forwardFlops = 0;  // the reference op's meta() for the chain's shapes
  int64_t backwardFlops = 0;
  std::string opKind;  // the reference op's kind(), which engine variants single ops out by
};

template <class T, class X>
struct DBlock {
  std::string kind;
  std::vector<DNode<T, X>> nodes;
  int size() const { return static_cast<int>(nodes.size()); }
};

// The env a device op runs under: the draws and the numerics switches the device ops have. One they lack
// (divideByCount) is refused rather than silently ignored. The op records in its context what its backward
// depends on (bf16Inputs).
inline DEnv nodeEnv(DrawSource& draws, const Numerics& n) {
  if (n.divideByCount) throw std::logic_error("the device ops have no divide-by-count LayerNorm numerics");
  return DEnv{&draws, n.erfGelu, n.bf16Matmul, n.bf16Inputs};
}

// The block runtime's trait on executor X (reference/block_runtime.h says what each member is for). FLOPs are
// the reference op's, computed once by the bridge; module state is copied device to device, untracked.
template <class T, class X>
struct DeviceRuntime {
  using Tensor = DTensor<T>;
  using Context = DContext<T>;
  using Buffer = DBuffer<T>;
  using Node = DNode<T, X>;

  X* x;

  const std::string& kind(const Node& n) const { return n.opKind; }
  Tensor forward(Node& n, std::span<const Tensor> in, Context* ctx, DrawSource& draws, const BlockEnv& benv) {
    return n.op->forward(in, ctx, nodeEnv(draws, benv.numerics));
  }
  void backward(Node& n, const Context& ctx, const Tensor& dout, std::span<Tensor> din) {
    n.op->backward(ctx, dout, din);
  }
  int64_t forwardFlops(const Node& n, std::span<const Tensor>) const { return n.forwardFlops; }
  int64_t backwardFlops(const Node& n, std::span<const Tensor>) const { return n.backwardFlops; }
  void addInto(Tensor& g, const Tensor& d) { x->launch(g.size(), AccumulateInto<T>{g.data(), d.data()}); }
  std::vector<Buffer*> buffers(Node& n) { return n.op->buffers(); }
  Tensor snapshot(const Buffer& b) {
    Tensor copy = Tensor::untracked(x->pool(), b.value.rows(), b.value.cols());
    x->copy(copy.data(), b.value.data(), copy.size());
    return copy;
  }
  void restore(Buffer& b, const Tensor& copy) { x->copy(b.value.data(), copy.data(), copy.size()); }
};

}  // namespace ckpt::gpu
