// The device op of reference/ops/linear.h: one line in deviceOps() (reference/cuda/dops.h).
#pragma once
#include <vector>

#include "reference/cuda/dop.h"
#include "reference/cuda/gemm.h"
#include "reference/cuda/kernels/reduce.cuh"

namespace ckpt::gpu {

// y = x W^T + b (reference/ops/linear.h). Under Numerics::bf16Inputs the products take bfloat16-rounded x and W
// (copies in workspace, rounded again in backward from the saved x, so the saved bytes are the reference's) and
// accumulate in T: y = bf16(x) bf16(W)^T + b, dW += dy^T bf16(x), dx = dy bf16(W); dy is not rounded.
template <class T, class X>
class DLinear final : public DOp<T, X> {
 public:
  DLinear(X& x, const DNodeDesc<T>& d)
      : DOp<T, X>(x), in_(d.inFeatures), out_(d.outFeatures), w_(this->param(d.params.at(0))), b_(this->param(d.params.at(1))) {}
  DTensor<T> forward(std::span<const DTensor<T>> in, DContext<T>* ctx, const DEnv& env) override {
    const int64_t n = in[0].rows();
    auto y = this->activation(n, out_);
    const DTensor<T> xin = operand(in[0], env.bf16Inputs), w = operand(w_.value, env.bf16Inputs);
    Gemm<T> g;
    g.transB = true;
    g.m = n, g.n = out_, g.k = in_;
    g.a = xin.data(), g.lda = in_;
    g.b = w.data(), g.ldb = in_;
    g.c = y.data(), g.ldc = out_;
    this->x().gemm(g);
    this->x().launch(y.size(), BiasAdd<T>{y.data(), b_.value.data(), out_});
    if (env.bf16Matmul) this->x().launch(y.size(), RoundToBf16<T>{y.data()});
    if (ctx) {
      saveFields(*ctx, Saved{in[0]});
      ctx->bf16Inputs = env.bf16Inputs;
    }
    return y;
  }
  void backward(const DContext<T>& ctx, const DTensor<T>& dout, std::span<DTensor<T>> din) override {
    const DTensor<T> xin = operand(loadFields<Saved>(ctx).x, ctx.bf16Inputs);
    const DTensor<T> w = operand(w_.value, ctx.bf16Inputs);
    const int64_t n = xin.rows();
    Gemm<T> gw;  // W.grad += dy^T x
    gw.transA = true;
    gw.m = out_, gw.n = in_, gw.k = n;
    gw.a = dout.data(), gw.lda = out_;
    gw.b = xin.data(), gw.ldb = in_;
    gw.beta = T(1);
    gw.c = w_.grad.data(), gw.ldc = in_;
    this->x().gemm(gw);
    this->x().launch(out_, ColumnSumAccumulate<T>{b_.grad.data(), dout.data(), n, out_});
    din[0] = this->activation(n, in_);
    Gemm<T> gx;  // dx = dy W
    gx.m = n, gx.n = in_, gx.k = out_;
    gx.a = dout.data(), gx.lda = out_;
    gx.b = w.data(), gx.ldb = in_;
    gx.c = din[0].data(), gx.ldc = in_;
    this->x().gemm(gx);
  }
  std::vector<DParam<T>*> params() override { return {&w_, &b_}; }

 private:
  struct Saved {
    DTensor<T> x;
    auto fields() { return std::tie(x); }
  };
  // A product's operand: t itself, or under bf16 inputs its rounded copy in workspace (not an activation, as
  // autocast's cast copies are not what the reference's meter counts).
  DTensor<T> operand(const DTensor<T>& t, bool bf16) {
    if (!bf16) return t;
    DTensor<T> r = this->workspace(t.rows(), t.cols());
    this->x().launch(t.size(), RoundedToBf16<T>{r.data(), t.data()});
    return r;
  }
  int64_t in_, out_;
  DParam<T> w_, b_;
};

}  // namespace ckpt::gpu
