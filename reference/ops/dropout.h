// Inverted dropout with probability p: y = x * m / (1 - p), m_i = [u_i > p], u_i uniform in (0, 1] from the
// Philox stream the generator model assigns (reference/rng.h). Saves the scaled mask, not its input.
// p = 0 draws nothing and is the identity (a copy), so a case with dropout off consumes no random numbers.
#pragma once
#include <algorithm>
#include <cmath>

#include "reference/op.h"
#include "reference/saved_fields.h"
#include "reference/saved_contexts.h"

namespace ckpt {

// The largest float not above p: for every float u, u > dropoutKeepAbove(p) exactly when u > p (the next float
// up is above p), so the keep test u_i > p runs in float, without a conversion to double per element.
inline float dropoutKeepAbove(double p) {
  float q = static_cast<float>(p);
  if (static_cast<double>(q) > p) q = std::nextafter(q, -1.0f);
  return q;
}

template <class T>
class Dropout final : public Op<T> {
 public:
  explicit Dropout(double p) : p_(p) {}
  std::string kind() const override { return "dropout"; }
  double p() const { return p_; }
  OpMeta meta(std::span<const Shape> in) const override {
    OpMeta m;
    m.out = in[0];
    m.forwardFlops = in[0].size();
    m.backwardFlops = in[0].size();
    m.contextExtraBytes = p_ > 0 ? in[0].size() * static_cast<int64_t>(sizeof(T)) : 0;
    m.randomDraws = p_ > 0 ? in[0].size() : 0;
    return m;
  }
  Tensor<T> forward(std::span<const Tensor<T>> in, Context<T>* ctx, const OpEnv& env) override {
    const auto& x = in[0];
    auto y = Tensor<T>::empty(x.rows(), x.cols());
    if (p_ == 0) {
      y.map() = x.map();
      return y;
    }
    const RngDraw d = env.draw(x.size());
    const T scale = T(1) / (T(1) - static_cast<T>(p_));
    Tensor<T> mask = ctx ? Tensor<T>::empty(x.rows(), x.cols()) : Tensor<T>();
    const T* xs = x.data();
    T* ys = y.data();
    // The uniforms a chunk at a time (a cache-resident workspace), then mask, output and saved mask in one pass
    // that vectorises: the keep test in float (dropoutKeepAbove), the saved mask written only when kept.
    const float keepAbove = dropoutKeepAbove(p_);
    constexpr int64_t kChunk = 1024;
    float u[kChunk];
    for (int64_t start = 0; start < x.size(); start += kChunk) {
      const int64_t len = std::min(kChunk, x.size() - start);
      d.uniforms(start, len, u);
      const T* xc = xs + start;
      T* yc = ys + start;
      if (ctx) {
        T* mc = mask.data() + start;
        for (int64_t j = 0; j < len; ++j) {
          const T mi = u[j] > keepAbove ? scale : T(0);
          yc[j] = xc[j] * mi;
          mc[j] = mi;
        }
      } else {
        for (int64_t j = 0; j < len; ++j) yc[j] = xc[j] * (u[j] > keepAbove ? scale : T(0));
      }
    }
    if (ctx) {
      saveFields(*ctx, Saved{mask});
      ctx->draw = d;
    }
    return y;
  }
  void backward(const Context<T>& ctx, const Tensor<T>& dout, std::span<Tensor<T>> din) override {
    din[0] = Tensor<T>::empty(dout.rows(), dout.cols());
    if (p_ == 0) {
      din[0].map() = dout.map();
      return;
    }
    din[0].map() = dout.map().cwiseProduct(loadFields<Saved>(ctx).mask.map());
  }

 private:
  using Saved = DropoutSaved<Tensor<T>>;
  double p_;
};

}  // namespace ckpt
