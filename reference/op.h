// The op contract (llm.c's rules, tiny-cuda-nn's owning Context):
//  - forward(inputs, ctx, env) returns a fresh output tensor. With ctx != nullptr it fills ctx with exactly what
//    backward needs: shared references to its inputs and/or output (no copy) plus new "extra" tensors (masks,
//    statistics, probabilities). With ctx == nullptr it saves nothing and allocates only its output; whatever
//    else it needs is workspace (plain Eigen temporaries), not an activation.
//  - backward(ctx, dout, din) assigns (=) one fresh tensor per input into din and accumulates (+=) into its
//    parameter gradients.
//  - meta(inputShapes) states analytically what forward/backward cost and allocate; the block simulator and the
//    planner rely on it and the executor's measurements are compared with it, so it must be exact.
// Ops know nothing of checkpointing.
#pragma once
#include <cstdint>
#include <span>
#include <string>
#include <vector>

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
  bool savesInputs = false;        // the context shares every input's storage
  bool savesOutput = false;        // the context shares the output's storage
  int64_t contextExtraBytes = 0;   // new tensors allocated for the context
  int64_t randomDraws = 0;         // Philox draws per forward; 0 for deterministic ops
  bool mutatesState = false;       // updates module buffers in training forward (BatchNorm)
  bool isMatmul = false;           // "expensive" output that selective policies keep (dots_saveable)
};

// Numerics an op is run with. Exact is the default; the others exist because a recompute that silently runs
// with another kernel or precision (an autocast state not restored, a different GELU) is a real bug class.
struct Numerics {
  bool erfGelu = false;      // GELU by erf instead of the tanh approximation
  bool bf16Matmul = false;   // matmul outputs rounded to bfloat16, as under autocast
  bool divideByCount = false;  // LayerNorm statistics as sum / C instead of sum * (1/C): another kernel's choice,
                               // equal to the default exactly when 1/C is exact (C a power of two)
  bool operator==(const Numerics&) const = default;
};

template <class T>
struct Context {
  std::vector<Tensor<T>> tensors;
  RngDraw draw;  // the stream position a random op used, so an op-level recompute can replay it
};

struct OpEnv {
  Rng* rng = nullptr;
  uint64_t opKey = 0;
  const RngDraw* replay = nullptr;  // op-level recompute: use this draw instead of reserving new ones
  RngDraw* record = nullptr;        // where to note the draw an op used (for a later op-level recompute)
  bool updateState = true;          // false while recomputing: state mutates once per step
  Numerics numerics;

  RngDraw draw(int64_t n) const {
    RngDraw d = replay ? *replay : rng->reserve(opKey, n);
    if (record) *record = d;
    return d;
  }
};

template <class T>
struct Param {
  std::string name;
  Mat<T> value;
  Mat<T> grad;
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
