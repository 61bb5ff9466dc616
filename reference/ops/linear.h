// Linear: y = x W^T + b, x (N, in), W (out, in), b (1, out). Saves its input. Under Numerics::bf16Inputs the
// products take bf16-rounded x and W (forward and backward; dy and the bias stay as they are), as autocast's.
#pragma once
#include "reference/op.h"
#include "reference/saved_fields.h"
#include "reference/saved_contexts.h"

namespace ckpt {

template <class T>
class Linear final : public Op<T> {
 public:
  Linear(std::string name, int64_t in, int64_t out)
      : w_{name + ".weight", Mat<T>::Zero(out, in), Mat<T>::Zero(out, in), true},
        b_{name + ".bias", Mat<T>::Zero(1, out), Mat<T>::Zero(1, out)} {}
  std::string kind() const override { return "linear"; }
  int64_t inFeatures() const { return w_.value.cols(); }
  int64_t outFeatures() const { return w_.value.rows(); }

  OpMeta meta(std::span<const Shape> in) const override {
    const int64_t n = in[0].rows, i = inFeatures(), o = outFeatures();
    OpMeta m;
    m.out = {n, o};
    m.forwardFlops = 2 * n * i * o + n * o;
    m.backwardFlops = 4 * n * i * o + n * o;  // dx = dy W, dW += dy^T x, db += colsum(dy)
    m.savesInputs = true;
    m.isMatmul = true;
    return m;
  }

  Tensor<T> forward(std::span<const Tensor<T>> in, Context<T>* ctx, const OpEnv& env) override {
    auto y = Tensor<T>::empty(in[0].rows(), outFeatures());
    if (env.numerics.bf16Inputs) y.map().noalias() = bf16Copy<T>(in[0].map()) * bf16Copy<T>(w_.value).transpose();
    else y.map().noalias() = in[0].map() * w_.value.transpose();
    y.map().rowwise() += b_.value.row(0);
    if (env.numerics.bf16Matmul) y.map() = y.map().unaryExpr([](T v) { return roundToBf16(v); });
    if (ctx) saveFields(*ctx, Saved{in[0]});
    return y;
  }

  void backward(const Context<T>& ctx, const Tensor<T>& dout, std::span<Tensor<T>> din) override {
    const Tensor<T> x = loadFields<Saved>(ctx).x;
    b_.grad += dout.map().colwise().sum();
    din[0] = Tensor<T>::empty(x.rows(), x.cols());
    if (ctx.numerics.bf16Inputs) {
      w_.grad.noalias() += dout.map().transpose() * bf16Copy<T>(x.map());
      din[0].map().noalias() = dout.map() * bf16Copy<T>(w_.value);
      return;
    }
    w_.grad.noalias() += dout.map().transpose() * x.map();
    din[0].map().noalias() = dout.map() * w_.value;
  }

  std::vector<Param<T>*> params() override { return {&w_, &b_}; }

 private:
  using Saved = InputSaved<Tensor<T>>;
  Param<T> w_, b_;
};

}  // namespace ckpt
