// The device op of reference/ops/attention.h: one line in deviceOps() (device/dops.h).
#pragma once
#include <cmath>
#include <stdexcept>
#include <string>

#include "device/dop.h"
#include "device/gemm.h"
#include "device/kernels/softmax.cuh"
#include "reference/saved_contexts.h"

namespace ckpt::gpu {

// Causal multi-head self-attention on fused qkv (B*T, 3C) (reference/ops/attention.h). Per sequence b, one
// strided-batched GEMM over the H heads for each product; softmax, dropout and the softmax backward are row /
// element bodies. Saves its input, the probabilities (B*H*T, T) and, when p > 0, the scaled mask.
// Under Numerics::bf16Inputs every product takes bfloat16-rounded operands and accumulates in T (reference/ops/
// attention.h): scores = bf16(q) bf16(k)^T, out = bf16(P') bf16(v); dP' = g bf16(v)^T, dv = bf16(P')^T g,
// dq = dS bf16(k), dk = dS^T bf16(q). The rounded qkv and P' are workspace copies; the context is unchanged.
template <class T, class X>
class DAttention final : public DOp<T, X> {
 public:
  DAttention(X& x, const DNodeDesc<T>& d)
      : DOp<T, X>(x), heads_(d.node.heads()), seq_(d.node.attentionSeq()), p_(d.node.p) {}

  DTensor<T> forward(std::span<const DTensor<T>> in, DContext<T>* ctx, const DEnv& env) override {
    const auto& qkv = in[0];
    const Dims d = dims(qkv);
    const int64_t bht = d.batch * heads_ * seq_, n = bht * seq_;
    auto out = this->activation(qkv.rows(), d.c);
    DTensor<T> probs = ctx ? this->activation(bht, seq_) : this->workspace(bht, seq_);
    DTensor<T> mask = ctx && p_ > 0 ? this->activation(bht, seq_) : DTensor<T>();
    RngDraw draw;
    if (p_ > 0) draw = env.draw(n);
    const T keepScale = T(1) / (T(1) - static_cast<T>(p_));
    const T scale = T(1) / std::sqrt(static_cast<T>(d.hd));
    const DTensor<T> ops = operand(qkv, env.bf16Inputs);  // q, k, v as the products take them
    for (int64_t b = 0; b < d.batch; ++b) {               // scores = q k^T
      const T* base = ops.data() + b * seq_ * 3 * d.c;
      this->x().gemm(headGemm(base, 3 * d.c, d.hd, false, base + d.c, 3 * d.c, d.hd, true,
                              probs.data() + b * heads_ * seq_ * seq_, seq_, seq_ * seq_, seq_, seq_, d.hd));
    }
    this->x().launch(bht, CausalSoftmaxForward<T>{probs.data(), seq_, scale});
    DTensor<T> kept = probs;
    if (p_ > 0) {
      kept = this->workspace(bht, seq_);
      this->x().launch(philoxBlocksFor(draw.offset, n),
                       DropoutForward<T>{kept.data(), mask.data(), probs.data(), n, drawPos(draw), p_, keepScale});
    }
    kept = roundedInPlace(std::move(kept), probs, env.bf16Inputs);
    for (int64_t b = 0; b < d.batch; ++b) {  // out = P' v
      const T* v = ops.data() + b * seq_ * 3 * d.c + 2 * d.c;
      this->x().gemm(headGemm(kept.data() + b * heads_ * seq_ * seq_, seq_, seq_ * seq_, false, v, 3 * d.c, d.hd, false,
                              out.data() + b * seq_ * d.c, d.c, d.hd, seq_, d.hd, seq_));
    }
    if (ctx) {
      saveFields(*ctx, Saved{qkv, probs, mask});  // mask stays undefined, and unsaved, when p = 0
      ctx->draw = draw;
      ctx->bf16Inputs = env.bf16Inputs;
    }
    return out;
  }

  void backward(const DContext<T>& ctx, const DTensor<T>& dout, std::span<DTensor<T>> din) override {
    const auto s = loadFields<Saved>(ctx);
    const DTensor<T>& qkv = s.qkv;
    const DTensor<T>& att = s.probs;
    const Dims d = dims(qkv);
    const int64_t bht = d.batch * heads_ * seq_, n = bht * seq_;
    const T scale = T(1) / std::sqrt(static_cast<T>(d.hd));
    din[0] = this->activation(qkv.rows(), qkv.cols());
    const DTensor<T> ops = operand(qkv, ctx.bf16Inputs);  // the forward's numerics, not the caller's
    auto dp = this->workspace(bht, seq_);
    for (int64_t b = 0; b < d.batch; ++b) {  // dP' = dout v^T
      const T* v = ops.data() + b * seq_ * 3 * d.c + 2 * d.c;
      this->x().gemm(headGemm(dout.data() + b * seq_ * d.c, d.c, d.hd, false, v, 3 * d.c, d.hd, true,
                              dp.data() + b * heads_ * seq_ * seq_, seq_, seq_ * seq_, seq_, seq_, d.hd));
    }
    DTensor<T> kept = att;
    if (p_ > 0) {
      const DTensor<T>& mask = s.mask;
      kept = this->workspace(bht, seq_);
      this->x().launch(n, Multiply<T>{kept.data(), att.data(), mask.data()});
      this->x().launch(n, Multiply<T>{dp.data(), dp.data(), mask.data()});
    }
    kept = roundedInPlace(std::move(kept), att, ctx.bf16Inputs);
    for (int64_t b = 0; b < d.batch; ++b) {  // dv = P'^T dout
      const T* g = dout.data() + b * seq_ * d.c;
      this->x().gemm(headGemm(kept.data() + b * heads_ * seq_ * seq_, seq_, seq_ * seq_, true, g, d.c, d.hd, false,
                              din[0].data() + b * seq_ * 3 * d.c + 2 * d.c, 3 * d.c, d.hd, seq_, d.hd, seq_));
    }
    this->x().launch(bht, SoftmaxBackward<T>{dp.data(), att.data(), seq_, scale});
    for (int64_t b = 0; b < d.batch; ++b) {  // dq = dS k, dk = dS^T q
      const T* q = ops.data() + b * seq_ * 3 * d.c;
      const T* ds = dp.data() + b * heads_ * seq_ * seq_;
      T* dq = din[0].data() + b * seq_ * 3 * d.c;
      this->x().gemm(
          headGemm(ds, seq_, seq_ * seq_, false, q + d.c, 3 * d.c, d.hd, false, dq, 3 * d.c, d.hd, seq_, d.hd, seq_));
      this->x().gemm(
          headGemm(ds, seq_, seq_ * seq_, true, q, 3 * d.c, d.hd, false, dq + d.c, 3 * d.c, d.hd, seq_, d.hd, seq_));
    }
  }

 private:
  using Saved = ckpt::AttentionSaved<DTensor<T>>;
  struct Dims {
    int64_t batch, c, hd;
  };
  // A product's operand: t itself, or under bf16 inputs its rounded copy in workspace.
  DTensor<T> operand(const DTensor<T>& t, bool bf16) {
    if (!bf16) return t;
    DTensor<T> r = this->workspace(t.rows(), t.cols());
    this->x().launch(t.size(), RoundedToBf16<T>{r.data(), t.data()});
    return r;
  }
  // P' rounded for its product under bf16 inputs. P' is workspace of its own after dropout and is rounded in
  // place; without dropout it is the saved P itself, which must stay unrounded (the softmax backward reads it).
  DTensor<T> roundedInPlace(DTensor<T> kept, const DTensor<T>& probs, bool bf16) {
    if (!bf16) return kept;
    if (kept.storageId() == probs.storageId()) return operand(probs, true);
    this->x().launch(kept.size(), RoundToBf16<T>{kept.data()});
    return kept;
  }
  Dims dims(const DTensor<T>& in) const {
    if (in.cols() % 3 != 0 || (in.cols() / 3) % heads_ != 0 || in.rows() % seq_ != 0)
      throw std::invalid_argument("attention: input must be (B*" + std::to_string(seq_) + ", 3C) with C divisible by " +
                                  std::to_string(heads_) + " heads");
    const int64_t c = in.cols() / 3;
    return {in.rows() / seq_, c, c / heads_};
  }
  // One GEMM batched over the heads of a sequence: C_h (m x n) = op(A_h) op(B_h), A_h = a + h * strideA, ...
  Gemm<T> headGemm(const T* a, int64_t lda, int64_t strideA, bool transA, const T* b, int64_t ldb, int64_t strideB,
                   bool transB, T* c, int64_t ldc, int64_t strideC, int64_t m, int64_t n, int64_t k) const {
    Gemm<T> g;
    g.transA = transA, g.transB = transB;
    g.m = m, g.n = n, g.k = k;
    g.a = a, g.lda = lda, g.strideA = strideA;
    g.b = b, g.ldb = ldb, g.strideB = strideB;
    g.c = c, g.ldc = ldc, g.strideC = strideC;
    g.batch = heads_;
    return g;
  }

  int64_t heads_, seq_;
  double p_;
};

}  // namespace ckpt::gpu
