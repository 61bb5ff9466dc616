// The device LM head of a language-model case (reference/ops/lm_head.h), which is its loss: h = LayerNorm(x_L)
// (eps 1e-5), logits = h W^T (no bias), cross-entropy over the vocabulary, the mean over rows. Composed of the
// LayerNorm, GEMM and cross-entropy bodies the other device ops use.
//
// It allocates what the reference allocates, in the reference's order, so the activation bytes the planner
// charges are what the device measures: a context of x_L (shared, no bytes) plus {h, mean, rstd, probabilities},
// then g_L in backward and nothing else. The logits are computed into the probabilities' buffer and become the
// probabilities in place (CrossEntropyForwardRow reads the label's logit first); backward turns the
// probabilities into dlogits in place, computes dh into g_L's buffer and runs the LayerNorm backward in place
// (the parameter gradients read dh before the input gradient overwrites it, row by row).
#pragma once
#include <cstdint>
#include <tuple>
#include <vector>

#include "device/dop.h"
#include "device/gemm.h"
#include "device/kernels/layernorm.cuh"
#include "device/kernels/loss.cuh"

namespace ckpt::gpu {

// The head's parameters: the case's, shared by every micro-batch's loss (DLoss of kind kLmHead).
template <class T>
struct DLmHead {
  DParam<T> lnWeight, lnBias, weight;
  bool tied = false;
  bool trainsWeight = true;
  T eps = T(0);
  int64_t vocab() const { return weight.value.rows(); }
  // Model order: head.ln.weight, head.ln.bias, head.weight.
  std::vector<DParam<T>*> params() { return {&lnWeight, &lnBias, &weight}; }
};

template <class T, class X>
DLmHead<T> makeLmHead(X& x, const DHeadDesc<T>& d) {
  return DLmHead<T>{
      uploadParam(x, d.lnWeight), uploadParam(x, d.lnBias), uploadParam(x, d.weight), d.tied, d.trainsWeight,
      static_cast<T>(d.eps)};
}

template <class T>
struct DLmHeadSaved {
  DTensor<T> x, h, mean, rstd, probs;  // x_L, the normalised rows, (n, 1) statistics, softmax of the logits
  auto fields() { return std::tie(x, h, mean, rstd, probs); }
};

// Writes the mean over rows of the rows' cross-entropy into value[0] (the caller divides by the micro-batch
// count); `terms` (n) is workspace for the rows' terms. With a context the buffers are activations saved into
// it, without they are workspace.
template <class T, class X>
void lmHeadForward(X& x, DLmHead<T>& head, const DTensor<T>& xin, const int* labels, T* terms, T* value,
                   DContext<T>* ctx) {
  const int64_t n = xin.rows(), c = xin.cols(), v = head.vocab();
  auto buffer = [&](int64_t cols) {
    return ctx ? DTensor<T>::empty(x.pool(), n, cols) : DTensor<T>::untracked(x.pool(), n, cols);
  };
  DTensor<T> h = buffer(c), mean = buffer(1), rstd = buffer(1), probs = buffer(v);
  {
    auto partial = DTensor<T>::untracked(x.pool(), n, kLayerNormLanes);
    layerNormForward(x, h.data(), mean.data(), rstd.data(), xin.data(), head.lnWeight.value.data(),
                     head.lnBias.value.data(), n, c, head.eps, partial.data());
  }
  Gemm<T> g;  // logits = h W^T, into the probabilities' buffer
  g.transB = true;
  g.m = n, g.n = v, g.k = c;
  g.a = h.data(), g.lda = c;
  g.b = head.weight.value.data(), g.ldb = c;
  g.c = probs.data(), g.ldc = v;
  x.gemm(g);
  x.launch(n, CrossEntropyForwardRow<T>{probs.data(), terms, probs.data(), labels, v});
  x.launch(1, SumRows<T>{value, terms, n, static_cast<T>(n)});
  if (ctx) saveFields(*ctx, DLmHeadSaved<T>{xin, h, mean, rstd, probs});
}

// dL/dx_L, a fresh activation; the head's parameter gradients accumulate (dW only when the weight trains).
// `divisor` is the micro-batch count M: dlogits is scaled by 1/M before the products, as the reference does.
template <class T, class X>
DTensor<T> lmHeadBackward(X& x, DLmHead<T>& head, const DContext<T>& ctx, const int* labels, int64_t divisor) {
  const auto s = loadFields<DLmHeadSaved<T>>(ctx);
  const int64_t n = s.x.rows(), c = s.x.cols(), v = head.vocab();
  T* dlogits = s.probs.data();
  x.launch(n * v, CrossEntropyBackward<T>{dlogits, dlogits, labels, v, T(1) / static_cast<T>(n)});
  if (divisor > 1) x.launch(n * v, ScaleBy<T>{dlogits, T(1) / static_cast<T>(divisor)});
  if (head.trainsWeight) {
    Gemm<T> gw;  // W.grad += dlogits^T h
    gw.transA = true;
    gw.m = v, gw.n = c, gw.k = n;
    gw.a = dlogits, gw.lda = v;
    gw.b = s.h.data(), gw.ldb = c;
    gw.beta = T(1);
    gw.c = head.weight.grad.data(), gw.ldc = c;
    x.gemm(gw);
  }
  auto dx = DTensor<T>::empty(x.pool(), n, c);
  Gemm<T> gh;  // dh = dlogits W, in dx's buffer
  gh.m = n, gh.n = c, gh.k = v;
  gh.a = dlogits, gh.lda = v;
  gh.b = head.weight.value.data(), gh.ldb = c;
  gh.c = dx.data(), gh.ldc = c;
  x.gemm(gh);
  x.launch(c, LayerNormBackwardParams<T>{head.lnWeight.grad.data(), head.lnBias.grad.data(), dx.data(), s.x.data(),
                                         s.mean.data(), s.rstd.data(), n, c});
  auto partial = DTensor<T>::untracked(x.pool(), n, 2 * kLayerNormLanes);
  layerNormBackwardInput(x, dx.data(), dx.data(), s.x.data(), s.mean.data(), s.rstd.data(), head.lnWeight.value.data(),
                         n, c, partial.data());
  return dx;
}

}  // namespace ckpt::gpu
