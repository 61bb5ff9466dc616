// Residual add: y = a + b. Saves nothing; backward hands each input its own copy of dout.
#pragma once
#include "reference/op.h"

namespace ckpt {

template <class T>
class Add final : public Op<T> {
 public:
  std::string kind() const override { return "add"; }
  OpMeta meta(std::span<const Shape> in) const override {
    OpMeta m;
    m.out = in[0];
    m.forwardFlops = in[0].size();
    m.backwardFlops = 0;
    return m;
  }
  Tensor<T> forward(std::span<const Tensor<T>> in, Context<T>*, const OpEnv&) override {
    auto y = Tensor<T>::empty(in[0].rows(), in[0].cols());
    y.map() = in[0].map() + in[1].map();
    return y;
  }
  void backward(const Context<T>&, const Tensor<T>& dout, std::span<Tensor<T>> din) override {
    din[0] = dout.clone();
    din[1] = dout.clone();
  }
};

}  // namespace ckpt
