// Tanh: y = tanh(x). Saves its output, since dy/dx = 1 - y^2 needs nothing else (as PyTorch does).
#pragma once
#include "reference/op.h"
#include "reference/saved_fields.h"
#include "reference/tanh_of.h"
#include "reference/saved_contexts.h"

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
    const auto& x = in[0];
    auto y = Tensor<T>::empty(x.rows(), x.cols());
    // tanhOf rather than Eigen's tanh: the same function GELU and the device kernel use, in a loop that vectorises.
    const T* xs = x.data();
    T* ys = y.data();
    for (int64_t i = 0; i < x.size(); ++i) ys[i] = tanhOf(xs[i]);
    if (ctx) saveFields(*ctx, Saved{y});
    return y;
  }
  void backward(const Context<T>& ctx, const Tensor<T>& dout, std::span<Tensor<T>> din) override {
    const Tensor<T> y = loadFields<Saved>(ctx).y;
    din[0] = Tensor<T>::empty(y.rows(), y.cols());
    din[0].map() = dout.map().array() * (T(1) - y.map().array().square());
  }

 private:
  using Saved = OutputSaved<Tensor<T>>;
};

}  // namespace ckpt
