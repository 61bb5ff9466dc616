// GELU, tanh approximation exactly as PyTorch's GELU(approximate="tanh") (tanh: reference/tanh_of.h):
//   y = 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))).
// Numerics::erfGelu switches forward to the exact 0.5 x (1 + erf(x / sqrt 2)): it models a recompute that picked
// another kernel. Backward is always the tanh derivative, so such a recompute changes only what later ops see
// and save, which is the observable bug. Saves its input.
#pragma once
#include <cmath>
#include <numbers>

#include "reference/op.h"
#include "reference/saved_fields.h"
#include "reference/tanh_of.h"
#include "reference/saved_contexts.h"

namespace ckpt {

template <class T>
class Gelu final : public Op<T> {
 public:
  std::string kind() const override { return "gelu"; }
  // Counted as the elementwise operations written below, a transcendental as one.
  OpMeta meta(std::span<const Shape> in) const override {
    OpMeta m;
    m.out = in[0];
    m.forwardFlops = 9 * in[0].size();
    m.backwardFlops = 19 * in[0].size();
    m.savesInputs = true;
    return m;
  }
  Tensor<T> forward(std::span<const Tensor<T>> in, Context<T>* ctx, const OpEnv& env) override {
    const auto& x = in[0];
    auto y = Tensor<T>::empty(x.rows(), x.cols());
    const T* xs = x.data();
    T* ys = y.data();
    if (env.numerics.erfGelu) {
      for (int64_t i = 0; i < x.size(); ++i) ys[i] = T(0.5) * xs[i] * (T(1) + std::erf(xs[i] * kInvSqrt2));
    } else {
      for (int64_t i = 0; i < x.size(); ++i) {
        const T v = xs[i];
        const T inner = kBeta * (v + kKappa * (v * v * v));
        ys[i] = T(0.5) * v * (T(1) + tanhOf(inner));
      }
    }
    if (ctx) saveFields(*ctx, Saved{x});
    return y;
  }
  // PyTorch's GeluBackward (tanh): dx = dy (0.5 (1 + t) + 0.5 x (1 - t^2) beta (1 + 3 kappa x^2)).
  void backward(const Context<T>& ctx, const Tensor<T>& dout, std::span<Tensor<T>> din) override {
    const Tensor<T> x = loadFields<Saved>(ctx).x;
    din[0] = Tensor<T>::empty(x.rows(), x.cols());
    const T* xs = x.data();
    const T* dy = dout.data();
    T* dx = din[0].data();
    for (int64_t i = 0; i < x.size(); ++i) {
      const T v = xs[i];
      const T sq = v * v;
      const T t = tanhOf(kBeta * (v + kKappa * (sq * v)));
      const T left = T(0.5) * v;
      const T right = T(1) + t;
      const T dleft = T(0.5) * right;
      const T dright = T(1) - t * t;
      const T dinner = kBeta * (T(1) + T(3) * kKappa * sq);
      dx[i] = dy[i] * (dleft + left * dright * dinner);
    }
  }

 private:
  using Saved = InputSaved<Tensor<T>>;
  // Rounded once from double, as PyTorch's kernels do.
  static constexpr T kBeta = static_cast<T>(std::numbers::sqrt2 * std::numbers::inv_sqrtpi);  // sqrt(2/pi)
  static constexpr T kKappa = static_cast<T>(0.044715);
  static constexpr T kInvSqrt2 = static_cast<T>(std::numbers::sqrt2 / 2);
};

}  // namespace ckpt
