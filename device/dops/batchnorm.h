// The device op of reference/ops/batchnorm.h: one line in deviceOps() (device/dops.h).
#pragma once
#include <vector>
#include <stdexcept>
#include <string>

#include "device/dop.h"
#include "device/kernels/batchnorm.cuh"
#include "reference/saved_contexts.h"

namespace ckpt::gpu {

// BatchNorm1d in training mode (reference/ops/batchnorm.h); saves its input, mean and rstd (1, C).
template <class T, class X>
class DBatchNorm final : public DOp<T, X> {
 public:
  DBatchNorm(X& x, const DNodeDesc<T>& d)
      : DOp<T, X>(x),
        eps_(OpNode::kNormEps),
        momentum_(OpNode::kBatchNormMomentum),
        w_(this->param(d.params.at(0))),
        b_(this->param(d.params.at(1))),
        runningMean_{d.buffers.at(0).name, uploadMatrix(x, d.buffers.at(0))},
        runningVar_{d.buffers.at(1).name, uploadMatrix(x, d.buffers.at(1))},
        numBatches_{d.buffers.at(2).name, uploadMatrix(x, d.buffers.at(2))} {}
  DTensor<T> forward(std::span<const DTensor<T>> in, DContext<T>* ctx, const DEnv&) override {
    const auto& xin = in[0];
    const int64_t n = xin.rows(), c = xin.cols();
    if (n < 2)
      throw std::invalid_argument("batchnorm: training mode needs at least 2 rows per batch, got " + std::to_string(n));
    auto y = this->activation(n, c);
    DTensor<T> mean = ctx ? this->activation(1, c) : this->workspace(1, c);
    DTensor<T> rstd = ctx ? this->activation(1, c) : this->workspace(1, c);
    this->x().launch(
        c, BatchNormForward<T>{y.data(), mean.data(), rstd.data(), runningMean_.value.data(), runningVar_.value.data(),
                               numBatches_.value.data(), xin.data(), w_.value.data(), b_.value.data(), n, c,
                               static_cast<T>(eps_), static_cast<T>(momentum_)});
    if (ctx) saveFields(*ctx, Saved{xin, mean, rstd});
    return y;
  }
  void backward(const DContext<T>& ctx, const DTensor<T>& dout, std::span<DTensor<T>> din) override {
    const auto s = loadFields<Saved>(ctx);
    const DTensor<T>& xin = s.x;
    const int64_t n = xin.rows(), c = xin.cols();
    din[0] = this->activation(n, c);
    this->x().launch(c, BatchNormBackward<T>{din[0].data(), w_.grad.data(), b_.grad.data(), dout.data(), xin.data(),
                                             s.mean.data(), s.rstd.data(), w_.value.data(), n, c});
  }
  std::vector<DParam<T>*> params() override { return {&w_, &b_}; }
  std::vector<DBuffer<T>*> buffers() override { return {&runningMean_, &runningVar_, &numBatches_}; }

 private:
  using Saved = ckpt::NormSaved<DTensor<T>>;
  double eps_, momentum_;
  DParam<T> w_, b_;
  DBuffer<T> runningMean_, runningVar_, numBatches_;
};

}  // namespace ckpt::gpu
