// The device op of reference/ops/add.h: one line in deviceOps() (device/dops.h).
#pragma once

#include "device/dop.h"

namespace ckpt::gpu {

template <class T, class X>
class DAdd final : public DOp<T, X> {
 public:
  using DOp<T, X>::DOp;
  DTensor<T> forward(std::span<const DTensor<T>> in, DContext<T>*, const DEnv&) override {
    auto y = this->activation(in[0].rows(), in[0].cols());
    this->x().launch(y.size(), AddForward<T>{y.data(), in[0].data(), in[1].data()});
    return y;
  }
  void backward(const DContext<T>&, const DTensor<T>& dout, std::span<DTensor<T>> din) override {
    din[0] = cloneActivation(this->x(), dout);
    din[1] = cloneActivation(this->x(), dout);
  }
};

}  // namespace ckpt::gpu
