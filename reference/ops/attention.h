// Causal multi-head self-attention as GPT-2 / llm.c, on a fused input: qkv (B*T, 3C) holds [q | k | v] along
// the columns, each C wide and split into H heads of hd = C / H columns; row b*T + t is token t of sequence b.
// Per sequence and head: P = causal softmax(q k^T / sqrt(hd)) (masked positions exactly 0), then inverted
// dropout with probability p on P (element i of the (B, H, T, T) array kept iff u_i > p, as reference/ops/
// dropout.h; p = 0 draws nothing), then out = P' v, written to columns h*hd.. of out (B*T, C).
// Saves its input plus the pre-dropout probabilities (B*H*T, T) and, when p > 0, the scaled mask (same shape).
// Under Numerics::bf16Inputs both products (q k^T and P' v) and the backward's four take bf16-rounded q, k, v and
// P' (the incoming gradients stay as they are), as autocast runs matmul: q, k and v come from a rounded copy of
// the input (a workspace), so the code path is the same with and without.
#pragma once
#include <algorithm>
#include <cmath>
#include <stdexcept>
#include <vector>

#include "reference/op.h"
#include "reference/ops/dropout.h"
#include "reference/saved_fields.h"
#include "reference/saved_contexts.h"

namespace ckpt {

template <class T>
class CausalSelfAttention final : public Op<T> {
 public:
  CausalSelfAttention(int64_t heads, int64_t seq, double attnDropout) : heads_(heads), seq_(seq), p_(attnDropout) {
    if (heads <= 0 || seq <= 0) throw std::invalid_argument("attention: heads and seq must be positive");
  }
  std::string kind() const override { return "attention"; }
  int64_t heads() const { return heads_; }
  int64_t seq() const { return seq_; }
  double p() const { return p_; }

  // With S = B*H*T*T score elements and hd the head width:
  //  forward  = 4 S hd (q k^T and P' v) + 6 S (scale, max, subtract, exp, sum, divide) [+ S mask multiply]
  //  backward = 8 S hd (dv, dP', dq, dk) + 5 S (dP P, its row sum, subtract, times P, scale) [+ 2 S: P' and dP]
  // Masked positions are computed and zeroed, not skipped, so the counts are over the full T x T.
  OpMeta meta(std::span<const Shape> in) const override {
    const Dims d = dims(in[0]);
    const int64_t s = d.batch * heads_ * seq_ * seq_;
    OpMeta m;
    m.out = {in[0].rows, d.c};
    m.forwardFlops = 4 * s * d.hd + 6 * s + (p_ > 0 ? s : 0);
    m.backwardFlops = 8 * s * d.hd + 5 * s + (p_ > 0 ? 2 * s : 0);
    m.savesInputs = true;
    m.contextExtraBytes = (p_ > 0 ? 2 : 1) * s * static_cast<int64_t>(sizeof(T));
    m.randomDraws = p_ > 0 ? s : 0;
    return m;
  }

  Tensor<T> forward(std::span<const Tensor<T>> in, Context<T>* ctx, const OpEnv& env) override {
    const auto& qkv = in[0];
    const Dims d = dims({qkv.rows(), qkv.cols()});
    const int64_t n = d.batch * heads_ * seq_ * seq_;
    auto out = Tensor<T>::empty(qkv.rows(), d.c);
    Tensor<T> probs, mask;
    if (ctx) {
      probs = Tensor<T>::empty(d.batch * heads_ * seq_, seq_);
      if (p_ > 0) mask = Tensor<T>::empty(d.batch * heads_ * seq_, seq_);
    }
    RngDraw draw;
    if (p_ > 0) draw = env.draw(n);
    const T keepScale = T(1) / (T(1) - static_cast<T>(p_));
    const float keepAbove = dropoutKeepAbove(p_);  // u > keepAbove exactly when u > p (reference/ops/dropout.h)
    const T scale = T(1) / std::sqrt(static_cast<T>(d.hd));
    const Mat<T> rounded = env.numerics.bf16Inputs ? bf16Copy<T>(qkv.map()) : Mat<T>();
    const auto x = operands(qkv, rounded);
    auto y = out.map();
    Mat<T> att(seq_, seq_), kept(seq_, seq_);  // workspace: one head's P and its dropped-out P'
    std::vector<float> u(p_ > 0 ? static_cast<size_t>(seq_ * seq_) : 0);  // workspace: one head's uniforms
    for (int64_t b = 0; b < d.batch; ++b) {
      for (int64_t h = 0; h < heads_; ++h) {
        const int64_t r0 = b * seq_, base = (b * heads_ + h) * seq_ * seq_;
        const auto q = x.block(r0, h * d.hd, seq_, d.hd);
        const auto k = x.block(r0, d.c + h * d.hd, seq_, d.hd);
        const auto v = x.block(r0, 2 * d.c + h * d.hd, seq_, d.hd);
        att.noalias() = q * k.transpose();
        for (int64_t t = 0; t < seq_; ++t) {
          auto live = att.row(t).head(t + 1);
          live *= scale;
          const T mx = live.maxCoeff();
          live = (live.array() - mx).exp().matrix();
          live /= live.sum();
          att.row(t).tail(seq_ - t - 1).setZero();
        }
        if (p_ > 0) {
          draw.uniforms(base, seq_ * seq_, u.data());
          const T* a = att.data();
          T* kd = kept.data();
          if (ctx) {
            T* md = mask.data() + base;
            for (int64_t i = 0; i < seq_ * seq_; ++i) {
              const T mi = u[static_cast<size_t>(i)] > keepAbove ? keepScale : T(0);
              kd[i] = a[i] * mi;
              md[i] = mi;
            }
          } else {
            for (int64_t i = 0; i < seq_ * seq_; ++i)
              kd[i] = a[i] * (u[static_cast<size_t>(i)] > keepAbove ? keepScale : T(0));
          }
        } else {
          kept = att;
        }
        if (ctx) std::copy(att.data(), att.data() + seq_ * seq_, probs.data() + base);
        if (env.numerics.bf16Inputs) kept = bf16Copy<T>(kept);
        y.block(r0, h * d.hd, seq_, d.hd).noalias() = kept * v;
      }
    }
    if (ctx) {
      saveFields(*ctx, Saved{qkv, probs, mask});  // mask stays undefined, and unsaved, when p = 0
      ctx->draw = draw;
    }
    return out;
  }

  // Per head: dv = P'^T dout, dP' = dout v^T, dP = dP' * mask, dS = P (dP - rowsum(dP P)) / sqrt(hd),
  // dq = dS k, dk = dS^T q. dS is exactly 0 where P is, so nothing flows to the future.
  void backward(const Context<T>& ctx, const Tensor<T>& dout, std::span<Tensor<T>> din) override {
    const auto s = loadFields<Saved>(ctx);
    const Tensor<T>& qkv = s.qkv;
    const Dims d = dims({qkv.rows(), qkv.cols()});
    const T scale = T(1) / std::sqrt(static_cast<T>(d.hd));
    const Mat<T> rounded = ctx.numerics.bf16Inputs ? bf16Copy<T>(qkv.map()) : Mat<T>();
    const auto x = operands(qkv, rounded);
    const auto dy = dout.map();
    din[0] = Tensor<T>::empty(qkv.rows(), qkv.cols());
    auto dx = din[0].map();
    Mat<T> kept(seq_, seq_), dp(seq_, seq_), ds(seq_, seq_);
    for (int64_t b = 0; b < d.batch; ++b) {
      for (int64_t h = 0; h < heads_; ++h) {
        const int64_t r0 = b * seq_, row0 = (b * heads_ + h) * seq_;
        const auto att = s.probs.map().block(row0, 0, seq_, seq_);
        const auto q = x.block(r0, h * d.hd, seq_, d.hd);
        const auto k = x.block(r0, d.c + h * d.hd, seq_, d.hd);
        const auto v = x.block(r0, 2 * d.c + h * d.hd, seq_, d.hd);
        const auto g = dy.block(r0, h * d.hd, seq_, d.hd);
        dp.noalias() = g * v.transpose();
        if (p_ > 0) {
          const auto mask = s.mask.map().block(row0, 0, seq_, seq_);
          kept = att.cwiseProduct(mask);
          dp = dp.cwiseProduct(mask);
        } else {
          kept = att;
        }
        if (ctx.numerics.bf16Inputs) kept = bf16Copy<T>(kept);
        dx.block(r0, 2 * d.c + h * d.hd, seq_, d.hd).noalias() = kept.transpose() * g;
        const Eigen::Matrix<T, Eigen::Dynamic, 1> rowDot = dp.cwiseProduct(att).rowwise().sum();
        ds = (att.array() * (dp.colwise() - rowDot).array() * scale).matrix();
        dx.block(r0, h * d.hd, seq_, d.hd).noalias() = ds * k;
        dx.block(r0, d.c + h * d.hd, seq_, d.hd).noalias() = ds.transpose() * q;
      }
    }
  }

 private:
  using Saved = AttentionSaved<Tensor<T>>;
  struct Dims {
    int64_t batch, c, hd;
  };
  // The q, k, v the products read: the input's storage, or its bf16-rounded copy `rounded` when that is not empty.
  static typename Tensor<T>::ConstMap operands(const Tensor<T>& qkv, const Mat<T>& rounded) {
    if (rounded.size() == 0) return qkv.map();
    return typename Tensor<T>::ConstMap(rounded.data(), rounded.rows(), rounded.cols());
  }
  Dims dims(Shape in) const {
    if (in.cols % 3 != 0 || (in.cols / 3) % heads_ != 0 || in.rows % seq_ != 0)
      throw std::invalid_argument("attention: input must be (B*" + std::to_string(seq_) + ", 3C) with C divisible by " +
                                  std::to_string(heads_) + " heads, got (" + std::to_string(in.rows) + ", " +
                                  std::to_string(in.cols) + ")");
    const int64_t c = in.cols / 3;
    return {in.rows / seq_, c, c / heads_};
  }

  int64_t heads_;
  int64_t seq_;
  double p_;
};

}  // namespace ckpt
