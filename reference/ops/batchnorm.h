// BatchNorm1d in training mode over the rows of x (N, C), as PyTorch: y = (x - mean) * rstd * weight + bias with
// the batch mean and biased batch variance per column. Every forward also moves the running statistics, as
// PyTorch's module does in training mode (a recompute that should not move them is the runtime's to undo:
// reference/block.h, StateGuard): running = (1 - m) running + m batch, the variance unbiased (n / (n - 1)), and counts
// the batch in num_batches_tracked. Saves its input plus the per-column mean and rstd (1, C) each.
#pragma once
#include <cmath>
#include <stdexcept>

#include "cases/op_node.h"
#include "reference/op.h"
#include "reference/saved_fields.h"
#include "reference/saved_contexts.h"

namespace ckpt {

template <class T>
class BatchNorm final : public Op<T> {
 public:
  BatchNorm(std::string name, int64_t width, double momentum = OpNode::kBatchNormMomentum,
            double eps = OpNode::kNormEps)
      : w_{name + ".weight", Mat<T>::Ones(1, width), Mat<T>::Zero(1, width)},
        b_{name + ".bias", Mat<T>::Zero(1, width), Mat<T>::Zero(1, width)},
        runningMean_{name + ".running_mean", Mat<T>::Zero(1, width)},
        runningVar_{name + ".running_var", Mat<T>::Ones(1, width)},
        numBatches_{name + ".num_batches_tracked", Mat<T>::Zero(1, 1)},
        momentum_(momentum),
        eps_(eps) {}
  std::string kind() const override { return "batchnorm"; }
  int64_t width() const { return w_.value.cols(); }
  double momentum() const { return momentum_; }
  double eps() const { return eps_; }

  // As written below. Per element: forward sum, centre, square, sum, scale, bias (6); backward xhat (2), dnorm,
  // its sum, dnorm xhat and its sum, the three-term combination (4), dweight (2), dbias (13). Per column:
  // forward two 1/N scalings, +eps, sqrt, reciprocal, rstd weight (6); backward two 1/N scalings and the two
  // accumulations (4). The running-statistics update (undone by the runtime after a recompute) is not counted, so a
  // recompute costs exactly what the forward cost.
  OpMeta meta(std::span<const Shape> in) const override {
    const int64_t n = in[0].rows, c = in[0].cols;
    OpMeta m;
    m.out = in[0];
    m.forwardFlops = 6 * n * c + 6 * c;
    m.backwardFlops = 13 * n * c + 4 * c;
    m.savesInputs = true;
    m.contextExtraBytes = 2 * c * static_cast<int64_t>(sizeof(T));
    m.mutatesState = true;
    return m;
  }

  Tensor<T> forward(std::span<const Tensor<T>> in, Context<T>* ctx, const OpEnv&) override {
    const auto& x = in[0];
    const int64_t n = x.rows(), c = x.cols();
    if (n < 2)
      throw std::invalid_argument("batchnorm: training mode needs at least 2 rows per batch, got " + std::to_string(n));
    const T invN = T(1) / static_cast<T>(n);
    auto y = Tensor<T>::empty(n, c);
    // Statistics are context tensors when saved, workspace otherwise.
    Tensor<T> meanT, rstdT;
    Mat<T> meanW, rstdW;
    if (ctx) {
      meanT = Tensor<T>::empty(1, c);
      rstdT = Tensor<T>::empty(1, c);
    } else {
      meanW.resize(1, c);
      rstdW.resize(1, c);
    }
    auto mean = ctx ? meanT.map() : typename Tensor<T>::Map(meanW.data(), 1, c);
    auto rstd = ctx ? rstdT.map() : typename Tensor<T>::Map(rstdW.data(), 1, c);
    const auto xm = x.map();
    mean = xm.colwise().sum() * invN;
    const Mat<T> centred = xm.rowwise() - mean.row(0);
    const Mat<T> sumSq = centred.array().square().colwise().sum().matrix();
    rstd = ((sumSq * invN).array() + static_cast<T>(eps_)).sqrt().inverse().matrix();
    auto ym = y.map();
    ym = (centred.array().rowwise() * (rstd.array() * w_.value.array()).row(0)).matrix();
    ym.rowwise() += b_.value.row(0);
    const T m = static_cast<T>(momentum_);
    const T unbiased = T(1) / static_cast<T>(n - 1);
    runningMean_.value = (T(1) - m) * runningMean_.value + m * mean;
    runningVar_.value = (T(1) - m) * runningVar_.value + m * (sumSq * unbiased);
    numBatches_.value(0, 0) += T(1);
    if (ctx) saveFields(*ctx, Saved{x, meanT, rstdT});
    return y;
  }

  // dx = rstd (dnorm - mean(dnorm) - xhat mean(dnorm xhat)) per column, dnorm = dy weight.
  void backward(const Context<T>& ctx, const Tensor<T>& dout, std::span<Tensor<T>> din) override {
    const auto s = loadFields<Saved>(ctx);
    const auto xm = s.x.map();
    const auto mean = s.mean.map();
    const auto rstd = s.rstd.map();
    const int64_t n = xm.rows(), c = xm.cols();
    const T invN = T(1) / static_cast<T>(n);
    const auto dy = dout.map();
    const Mat<T> xhat = ((xm.rowwise() - mean.row(0)).array().rowwise() * rstd.array().row(0)).matrix();
    const Mat<T> dnorm = (dy.array().rowwise() * w_.value.array().row(0)).matrix();
    const Mat<T> dnormMean = dnorm.colwise().sum() * invN;
    const Mat<T> dnormXhatMean = dnorm.cwiseProduct(xhat).colwise().sum() * invN;
    din[0] = Tensor<T>::empty(n, c);
    din[0].map() =
        (((dnorm.rowwise() - dnormMean.row(0)).array() - xhat.array().rowwise() * dnormXhatMean.array().row(0))
             .rowwise() *
         rstd.array().row(0))
            .matrix();
    w_.grad += dy.cwiseProduct(xhat).colwise().sum();
    b_.grad += dy.colwise().sum();
  }

  std::vector<Param<T>*> params() override { return {&w_, &b_}; }
  std::vector<Buffer<T>*> buffers() override { return {&runningMean_, &runningVar_, &numBatches_}; }

 private:
  using Saved = NormSaved<Tensor<T>>;
  Param<T> w_, b_;
  Buffer<T> runningMean_, runningVar_, numBatches_;
  double momentum_;
  double eps_;
};

}  // namespace ckpt
