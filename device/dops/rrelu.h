// The device op of reference/ops/rrelu.h: one line in deviceOps() (device/dops.h).
#pragma once

#include "device/dop.h"
#include "device/kernels/rrelu.cuh"
#include "reference/saved_contexts.h"

namespace ckpt::gpu {

// Randomized leaky ReLU in training mode: one draw per element, slopes in [lower, upper] where x <= 0. Saves the
// noise (the slope or 1 per element), which is all its backward reads.
template <class T, class X>
class DRrelu final : public DOp<T, X> {
 public:
  DRrelu(X& x, const DNodeDesc<T>& d) : DOp<T, X>(x), lower_(d.node.lower), upper_(d.node.upper) {}
  DTensor<T> forward(std::span<const DTensor<T>> in, DContext<T>* ctx, const DEnv& env) override {
    const auto& xin = in[0];
    auto y = this->activation(xin.rows(), xin.cols());
    const RngDraw d = env.draw(xin.size());
    DTensor<T> noise = ctx ? this->activation(xin.rows(), xin.cols()) : DTensor<T>();
    this->x().launch(philoxBlocksFor(d.offset, xin.size()),
                     RreluForward<T>{y.data(), noise.data(), xin.data(), xin.size(), drawPos(d), lower_, upper_});
    if (ctx) {
      saveFields(*ctx, Saved{noise});
      ctx->draw = d;
    }
    return y;
  }
  void backward(const DContext<T>& ctx, const DTensor<T>& dout, std::span<DTensor<T>> din) override {
    din[0] = this->activation(dout.rows(), dout.cols());
    this->x().launch(dout.size(), Multiply<T>{din[0].data(), dout.data(), loadFields<Saved>(ctx).noise.data()});
  }

 private:
  using Saved = ckpt::RReluSaved<DTensor<T>>;
  double lower_, upper_;
};

}  // namespace ckpt::gpu
