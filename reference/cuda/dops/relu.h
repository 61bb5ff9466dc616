// The device op of reference/ops/relu.h: one line in deviceOps() (reference/cuda/dops.h).
#pragma once

#include "reference/cuda/dop.h"

namespace ckpt::gpu {

template <class T, class X>
class DRelu final : public DOp<T, X> {
 public:
  using DOp<T, X>::DOp;
  DTensor<T> forward(std::span<const DTensor<T>> in, DContext<T>* ctx, const DEnv&) override {
    auto y = this->activation(in[0].rows(), in[0].cols());
    this->x().launch(y.size(), ReluForward<T>{y.data(), in[0].data()});
    if (ctx) saveFields(*ctx, Saved{y});
    return y;
  }
  void backward(const DContext<T>& ctx, const DTensor<T>& dout, std::span<DTensor<T>> din) override {
    const DTensor<T> y = loadFields<Saved>(ctx).y;
    din[0] = this->activation(y.rows(), y.cols());
    this->x().launch(y.size(), ReluBackward<T>{din[0].data(), y.data(), dout.data()});
  }

 private:
  struct Saved {
    DTensor<T> y;  // the output
    auto fields() { return std::tie(y); }
  };
};

}  // namespace ckpt::gpu
