// The device op of reference/ops/linear.h: one line in deviceOps() (device/dops.h).
#pragma once
#include <vector>

#include "device/dop.h"
#include "device/gemm.h"
#include "device/kernels/reduce.cuh"
#include "reference/saved_contexts.h"

namespace ckpt::gpu {

// One Linear's products on memory its caller owns (DLinear below, and the router and experts of dops/moe.h, so the
// device runs every Linear one way). Under Numerics::bf16Inputs the products take bfloat16-rounded x and W (copies
// in workspace, as the reference's Eigen temporaries; autocast's casts are not activations) and accumulate in T.
//
// A product's operand: `t` itself, or its rounded copy, held by `hold`.
template <class T, class X>
const T* linearOperand(X& x, const T* t, int64_t rows, int64_t cols, bool bf16, DTensor<T>& hold) {
  if (!bf16) return t;
  hold = DTensor<T>::untracked(x.pool(), rows, cols);
  x.launch(hold.size(), RoundedToBf16<T>{hold.data(), t});
  return hold.data();
}

// y (n, out) = x W^T + b for x (n, in); under bf16Matmul y is rounded to bfloat16 after the bias.
template <class T, class X>
void linearForwardRows(X& x, const T* in, int64_t n, const DParam<T>& w, const DParam<T>& b, T* y, bool bf16Inputs,
                       bool bf16Matmul) {
  const int64_t inF = w.value.cols(), outF = w.value.rows();
  DTensor<T> xh, wh;
  const T* xa = linearOperand(x, in, n, inF, bf16Inputs, xh);
  const T* wa = linearOperand(x, w.value.data(), outF, inF, bf16Inputs, wh);
  Gemm<T> g;
  g.transB = true;
  g.m = n, g.n = outF, g.k = inF;
  g.a = xa, g.lda = inF;
  g.b = wa, g.ldb = inF;
  g.c = y, g.ldc = outF;
  x.gemm(g);
  x.launch(n * outF, BiasAdd<T>{y, b.value.data(), outF});
  if (bf16Matmul) x.launch(n * outF, RoundToBf16<T>{y});
}

// The backward from the forward's input `saved` (n, in): W.grad += dy^T x, b.grad += colsum(dy), dx (n, in) = dy W
// (x and W rounded under bf16Inputs; dy never).
template <class T, class X>
void linearBackwardRows(X& x, const T* saved, int64_t n, DParam<T>& w, DParam<T>& b, const T* dout, T* dx,
                        bool bf16Inputs) {
  const int64_t inF = w.value.cols(), outF = w.value.rows();
  DTensor<T> xh, wh;
  const T* xa = linearOperand(x, saved, n, inF, bf16Inputs, xh);
  const T* wa = linearOperand(x, w.value.data(), outF, inF, bf16Inputs, wh);
  Gemm<T> gw;  // W.grad += dy^T x
  gw.transA = true;
  gw.m = outF, gw.n = inF, gw.k = n;
  gw.a = dout, gw.lda = outF;
  gw.b = xa, gw.ldb = inF;
  gw.beta = T(1);
  gw.c = w.grad.data(), gw.ldc = inF;
  x.gemm(gw);
  x.launch(outF, ColumnSumAccumulate<T>{b.grad.data(), dout, n, outF});
  Gemm<T> gx;  // dx = dy W
  gx.m = n, gx.n = inF, gx.k = outF;
  gx.a = dout, gx.lda = outF;
  gx.b = wa, gx.ldb = inF;
  gx.c = dx, gx.ldc = inF;
  x.gemm(gx);
}

// y = x W^T + b (reference/ops/linear.h): y = bf16(x) bf16(W)^T + b under bf16 inputs, dW += dy^T bf16(x),
// dx = dy bf16(W); the saved x is the input itself, so the saved bytes are the reference's.
template <class T, class X>
class DLinear final : public DOp<T, X> {
 public:
  DLinear(X& x, const DNodeDesc<T>& d)
      : DOp<T, X>(x),
        in_(d.node.inFeatures()),
        out_(d.node.outFeatures()),
        w_(this->param(d.params.at(0))),
        b_(this->param(d.params.at(1))) {}
  DTensor<T> forward(std::span<const DTensor<T>> in, DContext<T>* ctx, const DEnv& env) override {
    const int64_t n = in[0].rows();
    auto y = this->activation(n, out_);
    linearForwardRows(this->x(), in[0].data(), n, w_, b_, y.data(), env.bf16Inputs, env.bf16Matmul);
    if (ctx) {
      saveFields(*ctx, Saved{in[0]});
      ctx->bf16Inputs = env.bf16Inputs;
    }
    return y;
  }
  void backward(const DContext<T>& ctx, const DTensor<T>& dout, std::span<DTensor<T>> din) override {
    const DTensor<T> xin = loadFields<Saved>(ctx).x;
    din[0] = this->activation(xin.rows(), in_);
    linearBackwardRows(this->x(), xin.data(), xin.rows(), w_, b_, dout.data(), din[0].data(), ctx.bf16Inputs);
  }
  std::vector<DParam<T>*> params() override { return {&w_, &b_}; }

 private:
  using Saved = ckpt::InputSaved<DTensor<T>>;
  int64_t in_, out_;
  DParam<T> w_, b_;
};

}  // namespace ckpt::gpu
