// Tanh: y = tanh(x). Saves its output, since dy/dx = 1 - y^2 needs nothing else (as PyTorch does).
#pragma once
#include <cmath>

#include "reference/op.h"
#include "reference/saved_fields.h"

namespace ckpt {

template <class T>
class Tanh final : public Op<T> {
 public:
  std::string kind() const override { return "tanh"; }
  OpMeta meta(std::span<const Shape> in) const override {
    OpMeta m;
    m.out = in[0];
    m.forwardFlops = in[0].size();
    m.backwardFlops = 3 * in[0].size();  // dy (1 - y y)
    m.savesOutput = true;
    return m;
  }
  Tensor<T> forward(std::span<const Tensor<T>> in, Context<T>* ctx, const OpEnv&) override {
    auto y = Tensor<T>::empty(in[0].rows(), in[0].cols());
    // std::tanh per element rather than Eigen's vectorised approximation, the same function GELU uses.
    y.map() = in[0].map().unaryExpr([](T v) { return std::tanh(v); });
    if (ctx) saveFields(*ctx, Saved{y});
    return y;
  }
  void backward(const Context<T>& ctx, const Tensor<T>& dout, std::span<Tensor<T>> din) override {
    const Tensor<T> y = loadFields<Saved>(ctx).y;
    din[0] = Tensor<T>::empty(y.rows(), y.cols());
    din[0].map() = dout.map().array() * (T(1) - y.map().array().square());
  }

 private:
  struct Saved {
    Tensor<T> y;  // the output
    auto fields() { return std::tie(y); }
  };
};

}  // namespace ckpt
