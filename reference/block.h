// A block: a short op program in SSA form. Node k's inputs are value ids: -1 is the block input, j >= 0 the
// output of node j; the block output is the last node's output. It runs through the one block runtime
// (reference/block_runtime.h), here on the CPU reference's tensors and ops (CpuRuntime), for the reference
// trainer and for the checkpointing executor alike.
#pragma once
#include <memory>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "cases/op_node.h"
#include "reference/block_runtime.h"
#include "reference/op.h"

namespace ckpt {

template <class T>
struct Node {
  std::string name;
  std::unique_ptr<Op<T>> op;
  std::vector<int> inputs;
  // The node as its block kind stated it, which the op was built from (the device op is built from it too,
  // harness/engine/device_bridge.h).
  OpNode spec = {};
};

template <class T>
struct Block {
  std::string kind;
  std::vector<Node<T>> nodes;
  int size() const { return static_cast<int>(nodes.size()); }
};

template <class T>
using BlockTape = BlockTapeOf<Tensor<T>, Context<T>>;

// The block runtime's trait on the CPU reference (reference/block_runtime.h says what each member is for).
template <class T>
struct CpuRuntime {
  using Tensor = ckpt::Tensor<T>;
  using Context = ckpt::Context<T>;
  using Buffer = ckpt::Buffer<T>;

  std::string kind(const Node<T>& n) const { return n.op->kind(); }
  // The context records the numerics, so the backward differentiates the function the forward computed.
  Tensor forward(Node<T>& n, std::span<const Tensor> in, Context* ctx, DrawSource& draws, const BlockEnv& benv) {
    if (ctx) ctx->numerics = benv.numerics;
    return n.op->forward(in, ctx, OpEnv{&draws, benv.numerics});
  }
  void backward(Node<T>& n, const Context& ctx, const Tensor& dout, std::span<Tensor> din) {
    n.op->backward(ctx, dout, din);
  }
  int64_t forwardFlops(const Node<T>& n, std::span<const Tensor> in) const {
    return n.op->meta(shapesOf(in)).forwardFlops;
  }
  int64_t backwardFlops(const Node<T>& n, std::span<const Tensor> din) const {
    return n.op->meta(shapesOf(din)).backwardFlops;
  }
  void addInto(Tensor& g, const Tensor& d) { g.map() += d.map(); }
  std::vector<Buffer*> buffers(Node<T>& n) { return n.op->buffers(); }
  Mat<T> snapshot(const Buffer& b) { return b.value; }
  void restore(Buffer& b, const Mat<T>& value) { b.value = value; }

 private:
  static std::vector<Shape> shapesOf(std::span<const Tensor> ts) {
    std::vector<Shape> shapes;
    for (auto& t : ts) shapes.push_back({t.rows(), t.cols()});
    return shapes;
  }
};

template <class T>
std::vector<Shape> inputShapes(const Node<T>& n, const std::vector<Shape>& values, Shape x) {
  std::vector<Shape> s;
  for (int j : n.inputs) s.push_back(j < 0 ? x : values[j]);
  return s;
}

// The runtime's three entry points on the CPU reference (reference/block_runtime.h).
template <class T>
Tensor<T> blockForward(Block<T>& b, const Tensor<T>& x, BlockTape<T>* tape, const KeepMask& keep,
                       const BlockEnv& benv) {
  CpuRuntime<T> rt;
  return blockForward(rt, b, x, tape, keep, benv);
}

template <class T>
void recomputeDropped(Block<T>& b, BlockTape<T>& tape, const BlockEnv& benv) {
  CpuRuntime<T> rt;
  recomputeDropped(rt, b, tape, benv);
}

template <class T>
Tensor<T> blockBackward(Block<T>& b, BlockTape<T>&& tape, Tensor<T>&& dy) {
  CpuRuntime<T> rt;
  return blockBackward(rt, b, std::move(tape), std::move(dy));
}

}  // namespace ckpt
