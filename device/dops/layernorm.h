// The device op of reference/ops/layernorm.h: one line in deviceOps() (device/dops.h).
#pragma once
#include <vector>

#include "device/dop.h"
#include "device/kernels/layernorm.cuh"
#include "reference/saved_contexts.h"

namespace ckpt::gpu {

// Per-row LayerNorm (reference/ops/layernorm.h); saves its input, mean and rstd (N, 1).
template <class T, class X>
class DLayerNorm final : public DOp<T, X> {
 public:
  DLayerNorm(X& x, const DNodeDesc<T>& d)
      : DOp<T, X>(x), eps_(OpNode::kNormEps), w_(this->param(d.params.at(0))), b_(this->param(d.params.at(1))) {}
  DTensor<T> forward(std::span<const DTensor<T>> in, DContext<T>* ctx, const DEnv&) override {
    const auto& xin = in[0];
    const int64_t n = xin.rows(), c = xin.cols();
    auto y = this->activation(n, c);
    DTensor<T> mean = ctx ? this->activation(n, 1) : this->workspace(n, 1);
    DTensor<T> rstd = ctx ? this->activation(n, 1) : this->workspace(n, 1);
    auto partial = this->workspace(n, kLayerNormLanes);
    layerNormForward(this->x(), y.data(), mean.data(), rstd.data(), xin.data(), w_.value.data(), b_.value.data(), n, c,
                     static_cast<T>(eps_), partial.data());
    if (ctx) saveFields(*ctx, Saved{xin, mean, rstd});
    return y;
  }
  void backward(const DContext<T>& ctx, const DTensor<T>& dout, std::span<DTensor<T>> din) override {
    const auto s = loadFields<Saved>(ctx);
    const int64_t n = s.x.rows(), c = s.x.cols();
    din[0] = this->activation(n, c);
    auto partial = this->workspace(n, 2 * kLayerNormLanes);
    layerNormBackwardInput(this->x(), din[0].data(), dout.data(), s.x.data(), s.mean.data(), s.rstd.data(),
                           w_.value.data(), n, c, partial.data());
    this->x().launch(c, LayerNormBackwardParams<T>{w_.grad.data(), b_.grad.data(), dout.data(), s.x.data(),
                                                   s.mean.data(), s.rstd.data(), n, c});
  }
  std::vector<DParam<T>*> params() override { return {&w_, &b_}; }

 private:
  using Saved = ckpt::NormSaved<DTensor<T>>;

 private:
  double eps_;
  DParam<T> w_, b_;
};

}  // namespace ckpt::gpu
