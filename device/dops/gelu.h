// The device op of reference/ops/gelu.h: one line in deviceOps() (device/dops.h).
#pragma once

#include "device/dop.h"
#include "reference/saved_contexts.h"

namespace ckpt::gpu {

template <class T, class X>
class DGelu final : public DOp<T, X> {
 public:
  using DOp<T, X>::DOp;
  DTensor<T> forward(std::span<const DTensor<T>> in, DContext<T>* ctx, const DEnv& env) override {
    auto y = this->activation(in[0].rows(), in[0].cols());
    GeluForward<T> body{y.data(), in[0].data()};
    body.erfForm = env.erfGelu;
    this->x().launch(y.size(), body);
    if (ctx) saveFields(*ctx, Saved{in[0]});
    return y;
  }
  void backward(const DContext<T>& ctx, const DTensor<T>& dout, std::span<DTensor<T>> din) override {
    const DTensor<T> xin = loadFields<Saved>(ctx).x;
    din[0] = this->activation(xin.rows(), xin.cols());
    this->x().launch(xin.size(), GeluBackward<T>{din[0].data(), xin.data(), dout.data()});
  }

 private:
  using Saved = ckpt::InputSaved<DTensor<T>>;
};

}  // namespace ckpt::gpu
