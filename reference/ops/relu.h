// ReLU: y = max(x, 0). Saves its output (y > 0 exactly where x > 0), as PyTorch does.
#pragma once
#include "reference/op.h"
#include "reference/saved_fields.h"
#include "reference/saved_contexts.h"

namespace ckpt {

template <class T>
class Relu final : public Op<T> {
 public:
  std::string kind() const override { return "relu"; }
  OpMeta meta(std::span<const Shape> in) const override {
    OpMeta m;
    m.out = in[0];
    m.forwardFlops = in[0].size();
    m.backwardFlops = in[0].size();
    m.savesOutput = true;
    return m;
  }
  Tensor<T> forward(std::span<const Tensor<T>> in, Context<T>* ctx, const OpEnv&) override {
    auto y = Tensor<T>::empty(in[0].rows(), in[0].cols());
    y.map() = in[0].map().cwiseMax(T(0));
    if (ctx) saveFields(*ctx, Saved{y});
    return y;
  }
  void backward(const Context<T>& ctx, const Tensor<T>& dout, std::span<Tensor<T>> din) override {
    const Tensor<T> y = loadFields<Saved>(ctx).y;
    din[0] = Tensor<T>::empty(y.rows(), y.cols());
    din[0].map() = (y.map().array() > T(0)).select(dout.map(), T(0));
  }

 private:
  using Saved = OutputSaved<Tensor<T>>;
};

}  // namespace ckpt
