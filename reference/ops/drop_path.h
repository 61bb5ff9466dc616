// DropPath (stochastic depth, timm's DropPath with scale_by_keep): a sample is `seq` consecutive rows (one
// sequence); each sample's rows are kept and scaled by 1/(1 - p), or zeroed, together: one uniform u_s per sample
// from the Philox stream the generator model assigns, kept iff u_s > p (the convention of reference/ops/dropout.h,
// whose keep scale it computes the same way). Saves the per-sample scales, (samples, 1).
// The decision steers what the rest of the step computes (a dropped branch contributes nothing, its parameters
// get no gradient from that sample), so a recompute that decides anew differentiates another network.
#pragma once
#include <algorithm>
#include <stdexcept>
#include <vector>

#include "reference/op.h"
#include "reference/saved_fields.h"
#include "reference/saved_contexts.h"

namespace ckpt {

template <class T>
class DropPath final : public Op<T> {
 public:
  DropPath(int64_t seq, double p) : seq_(seq), p_(p) {
    if (seq <= 0 || p <= 0 || p >= 1) throw std::invalid_argument("drop_path: needs seq > 0 and p in (0, 1)");
  }
  std::string kind() const override { return "drop_path"; }
  int64_t seq() const { return seq_; }
  double p() const { return p_; }
  OpMeta meta(std::span<const Shape> in) const override {
    OpMeta m;
    m.out = in[0];
    m.forwardFlops = in[0].size();
    m.backwardFlops = in[0].size();
    m.contextExtraBytes = samples(in[0]) * static_cast<int64_t>(sizeof(T));
    m.randomDraws = samples(in[0]);
    return m;
  }
  Tensor<T> forward(std::span<const Tensor<T>> in, Context<T>* ctx, const OpEnv& env) override {
    const auto& x = in[0];
    const int64_t n = samples({x.rows(), x.cols()});
    const RngDraw d = env.draw(n);
    std::vector<float> u(static_cast<size_t>(n));
    d.uniforms(0, n, u.data());
    const T keepScale = T(1) / (T(1) - static_cast<T>(p_));
    std::vector<T> scales(static_cast<size_t>(n));  // workspace; the context gets its own counted copy
    for (size_t s = 0; s < scales.size(); ++s) scales[s] = static_cast<double>(u[s]) > p_ ? keepScale : T(0);
    auto y = Tensor<T>::empty(x.rows(), x.cols());
    scaleSamples(x, scales.data(), y);
    if (ctx) {
      auto saved = Tensor<T>::empty(n, 1);
      std::copy(scales.begin(), scales.end(), saved.data());
      saveFields(*ctx, Saved{saved});
      ctx->draw = d;
    }
    return y;
  }
  void backward(const Context<T>& ctx, const Tensor<T>& dout, std::span<Tensor<T>> din) override {
    din[0] = Tensor<T>::empty(dout.rows(), dout.cols());
    scaleSamples(dout, loadFields<Saved>(ctx).scales.data(), din[0]);
  }

 private:
  using Saved = DropPathSaved<Tensor<T>>;
  int64_t samples(Shape x) const {
    if (x.rows % seq_ != 0)
      throw std::invalid_argument("drop_path: " + std::to_string(x.rows) + " rows are not whole sequences of " +
                                  std::to_string(seq_));
    return x.rows / seq_;
  }
  void scaleSamples(const Tensor<T>& x, const T* scales, Tensor<T>& y) const {
    for (int64_t s = 0; s < x.rows() / seq_; ++s)
      y.map().middleRows(s * seq_, seq_) = x.map().middleRows(s * seq_, seq_) * scales[s];
  }
  int64_t seq_;
  double p_;
};

}  // namespace ckpt
