// LayerNorm over each row of x (N, C): y = (x - mean) * rstd * weight + bias, rstd = 1 / sqrt(var + eps) with
// the biased variance, as PyTorch's LayerNorm. Saves its input plus the per-row mean and rstd (N, 1) each, as
// llm.c does, so backward need not recompute the statistics.
#pragma once
#include <cmath>

#include "cases/op_node.h"
#include "reference/op.h"
#include "reference/saved_fields.h"
#include "reference/saved_contexts.h"

namespace ckpt {

template <class T>
class LayerNorm final : public Op<T> {
 public:
  LayerNorm(std::string name, int64_t width, double eps = OpNode::kNormEps)
      : w_{name + ".weight", Mat<T>::Ones(1, width), Mat<T>::Zero(1, width)},
        b_{name + ".bias", Mat<T>::Zero(1, width), Mat<T>::Zero(1, width)},
        eps_(eps) {}
  std::string kind() const override { return "layernorm"; }
  int64_t width() const { return w_.value.cols(); }
  double eps() const { return eps_; }

  // As written below. Per element: forward sum, centre, square, sum, centre, rstd, weight, bias (8); backward
  // xhat (2), dnorm, its sum, dnorm xhat and its sum, the three-term combination (4), dweight (2), dbias (13).
  // Per row: forward two 1/C scalings, +eps, sqrt, reciprocal (5); backward two 1/C scalings (2). Per column:
  // backward adds dweight and dbias into the gradients once (2).
  OpMeta meta(std::span<const Shape> in) const override {
    const int64_t n = in[0].rows, c = in[0].cols;
    OpMeta m;
    m.out = in[0];
    m.forwardFlops = 8 * n * c + 5 * n;
    m.backwardFlops = 13 * n * c + 2 * n + 2 * c;
    m.savesInputs = true;
    m.contextExtraBytes = 2 * n * static_cast<int64_t>(sizeof(T));
    return m;
  }

  Tensor<T> forward(std::span<const Tensor<T>> in, Context<T>* ctx, const OpEnv& env) override {
    const auto& x = in[0];
    const int64_t n = x.rows();
    const T invC = T(1) / static_cast<T>(x.cols());
    const bool divide = env.numerics.divideByCount;
    const T count = static_cast<T>(x.cols());
    auto y = Tensor<T>::empty(n, x.cols());
    // Statistics are context tensors when saved, workspace otherwise.
    Tensor<T> meanT, rstdT;
    Mat<T> meanW, rstdW;
    T* mean;
    T* rstd;
    if (ctx) {
      meanT = Tensor<T>::empty(n, 1);
      rstdT = Tensor<T>::empty(n, 1);
      mean = meanT.data();
      rstd = rstdT.data();
    } else {
      meanW.resize(n, 1);
      rstdW.resize(n, 1);
      mean = meanW.data();
      rstd = rstdW.data();
    }
    const auto xm = x.map();
    auto ym = y.map();
    for (int64_t r = 0; r < n; ++r) {
      mean[r] = divide ? xm.row(r).sum() / count : xm.row(r).sum() * invC;
      const T sq = (xm.row(r).array() - mean[r]).square().sum();
      const T var = divide ? sq / count : sq * invC;
      rstd[r] = T(1) / std::sqrt(var + static_cast<T>(eps_));
      ym.row(r) =
          ((xm.row(r).array() - mean[r]) * rstd[r] * w_.value.row(0).array() + b_.value.row(0).array()).matrix();
    }
    if (ctx) saveFields(*ctx, Saved{x, meanT, rstdT});
    return y;
  }

  // dx = rstd (dnorm - mean(dnorm) - xhat mean(dnorm xhat)), dnorm = dy weight (llm.c's layernorm_backward).
  void backward(const Context<T>& ctx, const Tensor<T>& dout, std::span<Tensor<T>> din) override {
    const auto s = loadFields<Saved>(ctx);
    const auto xm = s.x.map();
    const T* mean = s.mean.data();
    const T* rstd = s.rstd.data();
    const int64_t n = xm.rows(), c = xm.cols();
    const T invC = T(1) / static_cast<T>(c);
    const auto dy = dout.map();
    din[0] = Tensor<T>::empty(n, c);
    auto dx = din[0].map();
    Eigen::Array<T, 1, Eigen::Dynamic> xhat(c), dnorm(c);
    // Summed over rows first, then added once: the += rule then means exactly "plus this pass's gradient".
    Eigen::Array<T, 1, Eigen::Dynamic> dweight = Eigen::Array<T, 1, Eigen::Dynamic>::Zero(c), dbias = dweight;
    for (int64_t r = 0; r < n; ++r) {
      xhat = (xm.row(r).array() - mean[r]) * rstd[r];
      dnorm = dy.row(r).array() * w_.value.row(0).array();
      const T dnormMean = dnorm.sum() * invC;
      const T dnormXhatMean = (dnorm * xhat).sum() * invC;
      dx.row(r) = ((dnorm - dnormMean - xhat * dnormXhatMean) * rstd[r]).matrix();
      dweight += dy.row(r).array() * xhat;
      dbias += dy.row(r).array();
    }
    w_.grad.row(0).array() += dweight;
    b_.grad.row(0).array() += dbias;
  }

  std::vector<Param<T>*> params() override { return {&w_, &b_}; }

 private:
  using Saved = NormSaved<Tensor<T>>;
  Param<T> w_, b_;
  double eps_;
};

}  // namespace ckpt
