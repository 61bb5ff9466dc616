// The device op of reference/ops/dropout.h: one line in deviceOps() (device/dops.h).
#pragma once

#include "device/dop.h"
#include "reference/saved_contexts.h"

namespace ckpt::gpu {

// Inverted dropout (reference/ops/dropout.h); saves the scaled mask.
template <class T, class X>
class DDropout final : public DOp<T, X> {
 public:
  DDropout(X& x, double p) : DOp<T, X>(x), p_(p) {}
  DTensor<T> forward(std::span<const DTensor<T>> in, DContext<T>* ctx, const DEnv& env) override {
    const auto& xin = in[0];
    auto y = this->activation(xin.rows(), xin.cols());
    if (p_ == 0) {
      this->x().copy(y.data(), xin.data(), xin.size());
      return y;
    }
    const RngDraw d = env.draw(xin.size());
    const T scale = T(1) / (T(1) - static_cast<T>(p_));
    DTensor<T> mask = ctx ? this->activation(xin.rows(), xin.cols()) : DTensor<T>();
    this->x().launch(philoxBlocksFor(d.offset, xin.size()),
                     DropoutForward<T>{y.data(), mask.data(), xin.data(), xin.size(), drawPos(d), p_, scale});
    if (ctx) {
      saveFields(*ctx, Saved{mask});
      ctx->draw = d;
    }
    return y;
  }
  void backward(const DContext<T>& ctx, const DTensor<T>& dout, std::span<DTensor<T>> din) override {
    din[0] = this->activation(dout.rows(), dout.cols());
    if (p_ == 0) {
      this->x().copy(din[0].data(), dout.data(), dout.size());
      return;
    }
    this->x().launch(dout.size(), Multiply<T>{din[0].data(), dout.data(), loadFields<Saved>(ctx).mask.data()});
  }

 private:
  using Saved = ckpt::DropoutSaved<DTensor<T>>;
  double p_;
};

}  // namespace ckpt::gpu
