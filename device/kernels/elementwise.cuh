// Elementwise kernel bodies: one call per element index i. Each mirrors the expression of its reference op
// (reference/ops/*.h) operation for operation, so the host launcher reproduces the CPU op bit for bit.
// Naming follows llm.c: outputs first, gradients prefixed d; activation gradients assign, parameter gradients
// accumulate.
#pragma once
#include <cstdint>
#include <numbers>

#include "device/kernels/hd_math.cuh"

namespace ckpt::gpu {

// reference/ops/relu.h: y = std::max(x, 0) (also Eigen's cwiseMax for -0.0 and NaN).
template <class T>
struct ReluForward {
  T* out;
  const T* inp;
  CKPT_HD void operator()(int64_t i) const {
    const T v = inp[i];
    out[i] = v < T(0) ? T(0) : v;
  }
};

// dx = dy where y > 0, else 0 (the op saves its output).
template <class T>
struct ReluBackward {
  T* dinp;
  const T* out;
  const T* dout;
  CKPT_HD void operator()(int64_t i) const { dinp[i] = out[i] > T(0) ? dout[i] : T(0); }
};

template <class T>
struct TanhForward {
  T* out;
  const T* inp;
  CKPT_HD void operator()(int64_t i) const { out[i] = hdTanh(inp[i]); }
};

// dx = dy (1 - y^2).
template <class T>
struct TanhBackward {
  T* dinp;
  const T* out;
  const T* dout;
  CKPT_HD void operator()(int64_t i) const { dinp[i] = dout[i] * (T(1) - out[i] * out[i]); }
};

// GELU constants exactly as reference/ops/gelu.h rounds them (from double, once).
inline constexpr double kGeluBeta = std::numbers::sqrt2 * std::numbers::inv_sqrtpi;  // sqrt(2/pi)
inline constexpr double kGeluKappa = 0.044715;
inline constexpr double kGeluInvSqrt2 = std::numbers::sqrt2 / 2;

// Tanh approximation, or the exact erf form under Numerics::erfGelu.
template <class T>
struct GeluForward {
  T* out;
  const T* inp;
  bool erfForm = false;
  T beta = static_cast<T>(kGeluBeta);
  T kappa = static_cast<T>(kGeluKappa);
  T invSqrt2 = static_cast<T>(kGeluInvSqrt2);
  CKPT_HD void operator()(int64_t i) const {
    const T v = inp[i];
    if (erfForm) {
      out[i] = T(0.5) * v * (T(1) + hdErf(v * invSqrt2));
    } else {
      const T inner = beta * (v + kappa * (v * v * v));
      out[i] = T(0.5) * v * (T(1) + hdTanh(inner));
    }
  }
};

// PyTorch's GeluBackward (tanh): dx = dy (0.5 (1 + t) + 0.5 x (1 - t^2) beta (1 + 3 kappa x^2)).
template <class T>
struct GeluBackward {
  T* dinp;
  const T* inp;
  const T* dout;
  T beta = static_cast<T>(kGeluBeta);
  T kappa = static_cast<T>(kGeluKappa);
  CKPT_HD void operator()(int64_t i) const {
    const T v = inp[i];
    const T sq = v * v;
    const T t = hdTanh(beta * (v + kappa * (sq * v)));
    const T left = T(0.5) * v;
    const T right = T(1) + t;
    const T dleft = T(0.5) * right;
    const T dright = T(1) - t * t;
    const T dinner = beta * (T(1) + T(3) * kappa * sq);
    dinp[i] = dout[i] * (dleft + left * dright * dinner);
  }
};

template <class T>
struct AddForward {
  T* out;
  const T* a;
  const T* b;
  CKPT_HD void operator()(int64_t i) const { out[i] = a[i] + b[i]; }
};

// dst += src (gradient accumulation of a value with several consumers).
template <class T>
struct AccumulateInto {
  T* dst;
  const T* src;
  CKPT_HD void operator()(int64_t i) const { dst[i] += src[i]; }
};

template <class T>
struct Multiply {
  T* out;
  const T* a;
  const T* b;
  CKPT_HD void operator()(int64_t i) const { out[i] = a[i] * b[i]; }
};

template <class T>
struct Copy {
  T* out;
  const T* inp;
  CKPT_HD void operator()(int64_t i) const { out[i] = inp[i]; }
};

// out *= factor (a micro-batch loss's gradient, scaled by 1/M).
template <class T>
struct ScaleBy {
  T* out;
  T factor;
  CKPT_HD void operator()(int64_t i) const { out[i] = out[i] * factor; }
};

// out /= divisor (a micro-batch loss's value, divided by M).
template <class T>
struct DivideBy {
  T* out;
  T divisor;
  CKPT_HD void operator()(int64_t i) const { out[i] = out[i] / divisor; }
};

template <class T>
struct Fill {
  T* out;
  T value;
  CKPT_HD void operator()(int64_t i) const { out[i] = value; }
};

// Linear's y.rowwise() += b over a (rows, cols) row-major output.
template <class T>
struct BiasAdd {
  T* out;
  const T* bias;
  int64_t cols;
  CKPT_HD void operator()(int64_t i) const { out[i] = out[i] + bias[i % cols]; }
};

// Numerics::bf16Matmul: a GEMM output rounded to bfloat16.
template <class T>
struct RoundToBf16 {
  T* out;
  CKPT_HD void operator()(int64_t i) const { out[i] = hdRoundToBf16(out[i]); }
};

// Numerics::bf16Inputs: a matrix product's operand, rounded to bfloat16 into workspace (the operand itself, an
// activation or a parameter, stays as it is, as autocast's casts leave the float tensors alone).
template <class T>
struct RoundedToBf16 {
  T* out;
  const T* inp;
  CKPT_HD void operator()(int64_t i) const { out[i] = hdRoundToBf16(inp[i]); }
};

// Plain SGD as reference/step.h: w -= lr * grad.
template <class T>
struct SgdUpdate {
  T* weight;
  const T* grad;
  T lr;
  CKPT_HD void operator()(int64_t i) const { weight[i] = weight[i] - lr * grad[i]; }
};

}  // namespace ckpt::gpu
