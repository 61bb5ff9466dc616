// The device op of reference/ops/drop_path.h: one line in deviceOps() (device/dops.h).
#pragma once
#include <stdexcept>
#include <string>

#include "device/dop.h"
#include "device/kernels/drop_path.cuh"
#include "reference/saved_contexts.h"

namespace ckpt::gpu {

// Drop-path (stochastic depth): each sample (seq consecutive rows) kept with its rows scaled by 1 / (1 - p), or
// zeroed, from one draw per sample. Saves the per-sample scales (samples, 1).
template <class T, class X>
class DDropPath final : public DOp<T, X> {
 public:
  DDropPath(X& x, const DNodeDesc<T>& d) : DOp<T, X>(x), seq_(d.node.sampleRows()), p_(d.node.p) {
    if (seq_ <= 0) throw std::invalid_argument("drop_path: seq must be positive");
  }
  DTensor<T> forward(std::span<const DTensor<T>> in, DContext<T>* ctx, const DEnv& env) override {
    const auto& xin = in[0];
    if (xin.rows() % seq_ != 0)
      throw std::invalid_argument("drop_path: " + std::to_string(xin.rows()) + " rows are not samples of " +
                                  std::to_string(seq_));
    const int64_t samples = xin.rows() / seq_;
    auto y = this->activation(xin.rows(), xin.cols());
    const RngDraw d = env.draw(samples);
    const T keepScale = T(1) / (T(1) - static_cast<T>(p_));
    DTensor<T> scales = ctx ? this->activation(samples, 1) : this->workspace(samples, 1);
    this->x().launch(philoxBlocksFor(d.offset, samples),
                     DropPathScales<T>{scales.data(), samples, drawPos(d), p_, keepScale});
    this->x().launch(y.size(), ScaleBySample<T>{y.data(), xin.data(), scales.data(), seq_ * xin.cols()});
    if (ctx) {
      saveFields(*ctx, Saved{scales});
      ctx->draw = d;
    }
    return y;
  }
  void backward(const DContext<T>& ctx, const DTensor<T>& dout, std::span<DTensor<T>> din) override {
    din[0] = this->activation(dout.rows(), dout.cols());
    this->x().launch(dout.size(), ScaleBySample<T>{din[0].data(), dout.data(), loadFields<Saved>(ctx).scales.data(),
                                                   seq_ * dout.cols()});
  }

 private:
  using Saved = ckpt::DropPathSaved<DTensor<T>>;
  int64_t seq_;
  double p_;
};

}  // namespace ckpt::gpu
