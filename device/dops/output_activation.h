// An element-wise activation whose backward reads only its output (relu, tanh), as the reference's ops save it:
// the forward and backward kernel bodies (kernels/elementwise.cuh) are its parameters.
#pragma once

#include "device/dop.h"
#include "reference/saved_contexts.h"

namespace ckpt::gpu {

template <class T, class X, template <class> class Forward, template <class> class Backward>
class DOutputActivation final : public DOp<T, X> {
 public:
  using DOp<T, X>::DOp;
  DTensor<T> forward(std::span<const DTensor<T>> in, DContext<T>* ctx, const DEnv&) override {
    auto y = this->activation(in[0].rows(), in[0].cols());
    this->x().launch(y.size(), Forward<T>{y.data(), in[0].data()});
    if (ctx) saveFields(*ctx, Saved{y});
    return y;
  }
  void backward(const DContext<T>& ctx, const DTensor<T>& dout, std::span<DTensor<T>> din) override {
    const DTensor<T> y = loadFields<Saved>(ctx).y;
    din[0] = this->activation(y.rows(), y.cols());
    this->x().launch(y.size(), Backward<T>{din[0].data(), y.data(), dout.data()});
  }

 private:
  using Saved = ckpt::OutputSaved<DTensor<T>>;
};

}  // namespace ckpt::gpu
