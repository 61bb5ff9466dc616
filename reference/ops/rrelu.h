// RReLU in training (PyTorch's nn.RReLU, _rrelu_with_noise_train): a slope r_i uniform in [lower, upper] per
// element, y_i = x_i * noise_i with noise_i = r_i where x_i <= 0 and 1 elsewhere. One uniform is drawn per element
// whatever its sign (PyTorch draws only for x_i <= 0; a fixed count keeps the draws, and the planner's count, a
// function of the shape), r_i = lower + (upper - lower) u_i in double, then rounded to T. Saves the noise, which the
// backward multiplies by: the slopes are data the forward drew, so a recompute must draw the same ones.
#pragma once
#include <algorithm>

#include "reference/op.h"
#include "reference/saved_fields.h"
#include "reference/saved_contexts.h"

namespace ckpt {

template <class T>
class Rrelu final : public Op<T> {
 public:
  Rrelu(double lower, double upper) : lower_(lower), upper_(upper) {}
  std::string kind() const override { return "rrelu"; }
  double lower() const { return lower_; }
  double upper() const { return upper_; }
  OpMeta meta(std::span<const Shape> in) const override {
    OpMeta m;
    m.out = in[0];
    m.forwardFlops = in[0].size();
    m.backwardFlops = in[0].size();
    m.contextExtraBytes = in[0].size() * static_cast<int64_t>(sizeof(T));
    m.randomDraws = in[0].size();
    return m;
  }
  Tensor<T> forward(std::span<const Tensor<T>> in, Context<T>* ctx, const OpEnv& env) override {
    const auto& x = in[0];
    const RngDraw d = env.draw(x.size());
    auto y = Tensor<T>::empty(x.rows(), x.cols());
    Tensor<T> noise = ctx ? Tensor<T>::empty(x.rows(), x.cols()) : Tensor<T>();
    const T* xs = x.data();
    T* ys = y.data();
    constexpr int64_t kChunk = 1024;  // the uniforms a chunk at a time, as dropout draws them
    float u[kChunk];
    for (int64_t start = 0; start < x.size(); start += kChunk) {
      const int64_t len = std::min(kChunk, x.size() - start);
      d.uniforms(start, len, u);
      for (int64_t j = 0; j < len; ++j) {
        const T r = static_cast<T>(lower_ + (upper_ - lower_) * static_cast<double>(u[j]));
        const T ni = xs[start + j] <= T(0) ? r : T(1);
        ys[start + j] = xs[start + j] * ni;
        if (ctx) noise.data()[start + j] = ni;
      }
    }
    if (ctx) {
      saveFields(*ctx, Saved{noise});
      ctx->draw = d;
    }
    return y;
  }
  void backward(const Context<T>& ctx, const Tensor<T>& dout, std::span<Tensor<T>> din) override {
    din[0] = Tensor<T>::empty(dout.rows(), dout.cols());
    din[0].map() = dout.map().cwiseProduct(loadFields<Saved>(ctx).noise.map());
  }

 private:
  using Saved = RReluSaved<Tensor<T>>;
  double lower_, upper_;
};

}  // namespace ckpt
