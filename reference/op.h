// The op contract (llm.c's rules, tiny-cuda-nn's owning Context):
//  - forward(inputs, ctx, env) returns a fresh output tensor. With ctx != nullptr it fills ctx with exactly what
//    backward needs: shared references to its inputs and/or output (no copy) plus new "extra" tensors (masks,
//    statistics, probabilities). With ctx == nullptr it saves nothing and allocates only its output; whatever
//    else it needs is workspace (plain Eigen temporaries), not an activation.
//  - backward(ctx, dout, din) assigns (=) one fresh tensor per input into din and accumulates (+=) into its
//    parameter gradients.
//  - meta(inputShapes) states analytically what forward/backward cost and allocate; the block simulator and the
//    planner rely on it and the executor's measurements are compared with it, so it must be exact.
//  - what an op may ask of its caller is OpEnv: random numbers (a DrawSource) and the ambient numerics.
// Ops know nothing of checkpointing: a recompute replays draws through the DrawSource it hands the op, and keeps
// module state from moving twice by restoring the buffers afterwards (reference/block.h, StateGuard), so a
// stateful op updates its buffers on every training forward, as PyTorch's modules do.
#pragma once
#include <cstdint>
#include <span>
#include <stdexcept>
#include <string>
#include <vector>

#include "reference/aux_loss.h"
#include "reference/numerics.h"
#include "reference/rng.h"
#include "reference/tensor.h"

namespace ckpt {

struct Shape {
  int64_t rows = 0;
  int64_t cols = 0;
  int64_t size() const { return rows * cols; }
  bool operator==(const Shape&) const = default;
};

struct OpMeta {
  Shape out;
  int64_t forwardFlops = 0;
  int64_t backwardFlops = 0;
  bool savesInputs = false;       // the context shares every input's storage
  bool savesOutput = false;       // the context shares the output's storage
  int64_t contextExtraBytes = 0;  // new tensors allocated for the context
  int64_t randomDraws = 0;        // Philox draws per forward; 0 for deterministic ops
  bool mutatesState = false;      // updates module buffers in training forward (BatchNorm)
  bool isMatmul = false;          // "expensive" output that selective policies keep (dots_saveable)
};

template <class T>
struct Context {
  std::vector<Tensor<T>> tensors;
  RngDraw draw;  // the stream position a random op used, so an op-level recompute can replay it
  // The numerics the forward ran under, so the backward differentiates the function the forward computed (a bf16
  // product's backward multiplies by the same rounded operands). The block runtime records it.
  Numerics numerics;
};

struct OpEnv {
  DrawSource* draws = nullptr;  // where a random op's numbers come from; deterministic ops never ask
  Numerics numerics;

  RngDraw draw(int64_t n) const {
    if (!draws) throw std::logic_error("a random op ran without a DrawSource in its OpEnv");
    return draws->draw(n);
  }
};

template <class T>
struct Param {
  std::string name;
  Mat<T> value;
  Mat<T> grad;
  // PyTorch's shape is (rows, cols) (a Linear's, an embedding's or the LM head's weight, stored as PyTorch stores
  // it); otherwise it is (rows * cols,). The adapter protocol's shapes follow it (harness/validate/case_dir.h).
  bool matrix = false;
};

// Module state that is not trained but is part of what a step must leave bitwise identical.
template <class T>
struct Buffer {
  std::string name;
  Mat<T> value;
};

template <class T>
class Op {
 public:
  virtual ~Op() = default;
  virtual std::string kind() const = 0;
  virtual OpMeta meta(std::span<const Shape> in) const = 0;
  virtual Tensor<T> forward(std::span<const Tensor<T>> in, Context<T>* ctx, const OpEnv& env) = 0;
  virtual void backward(const Context<T>& ctx, const Tensor<T>& dout, std::span<Tensor<T>> din) = 0;
  virtual std::vector<Param<T>*> params() { return {}; }
  virtual std::vector<Buffer<T>*> buffers() { return {}; }
};

// bfloat16 rounding (round to nearest even on the top 16 bits of the float), applied through float.
template <class T>
inline T roundToBf16(T v) {
  float f = static_cast<float>(v);
  uint32_t u;
  static_assert(sizeof(u) == sizeof(f));
  __builtin_memcpy(&u, &f, 4);
  if ((u & 0x7f800000u) != 0x7f800000u) u += 0x7fffu + ((u >> 16) & 1u);
  u &= 0xffff0000u;
  __builtin_memcpy(&f, &u, 4);
  return static_cast<T>(f);
}

}  // namespace ckpt

namespace ckpt {

// A matrix's values rounded to bfloat16 (a workspace copy: a product's operands under Numerics::bf16Inputs).
template <class T, class M>
Mat<T> bf16Copy(const M& m) {
  return m.unaryExpr([](T v) { return roundToBf16(v); });
}

}  // namespace ckpt
