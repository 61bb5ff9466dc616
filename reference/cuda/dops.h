// The reference ops (reference/ops/*.h) on a device executor X (HostExec or CudaExec): the same contract as
// reference/op.h — forward returns a fresh output and, given a context, fills it with exactly the tensors the
// reference saves, allocated in the reference's order (so activation bytes match); backward assigns input
// gradients and accumulates parameter gradients. Arithmetic is in the kernel bodies (kernels/*.cuh), GEMMs are
// Gemm descriptions (gemm.h), workspace is untracked device memory (the reference's Eigen temporaries).
#pragma once
#include <cmath>
#include <memory>
#include <span>
#include <stdexcept>
#include <string>
#include <vector>

#include "reference/cuda/dmodel.h"
#include "reference/cuda/dtensor.h"
#include "reference/cuda/gemm.h"
#include "reference/cuda/kernels/batchnorm.cuh"
#include "reference/cuda/kernels/dropout.cuh"
#include "reference/cuda/kernels/elementwise.cuh"
#include "reference/cuda/kernels/layernorm.cuh"
#include "reference/cuda/kernels/loss.cuh"
#include "reference/cuda/kernels/reduce.cuh"
#include "reference/cuda/kernels/softmax.cuh"
#include "reference/saved_fields.h"

namespace ckpt::gpu {

// reference/op.h's OpEnv: where random numbers come from, and the ambient numerics.
struct DEnv {
  DrawSource* draws = nullptr;
  bool erfGelu = false;
  bool bf16Matmul = false;

  RngDraw draw(int64_t n) const {
    if (!draws) throw std::logic_error("a random device op ran without a DrawSource in its DEnv");
    return draws->draw(n);
  }
};

inline DrawPos drawPos(const RngDraw& d) { return DrawPos{d.seed, d.subsequence, d.offset}; }

template <class T, class X>
DTensor<T> uploadMatrix(X& x, const HostMatrix<T>& m) {
  auto t = DTensor<T>::untracked(x.pool(), m.rows, m.cols);
  x.upload(t.data(), m.data.data(), t.size());
  return t;
}

template <class T, class X>
HostMatrix<T> downloadMatrix(X& x, const DTensor<T>& t, std::string name = {}) {
  HostMatrix<T> m{std::move(name), t.rows(), t.cols(), std::vector<T>(static_cast<size_t>(t.size()))};
  x.download(m.data.data(), t.data(), t.size());
  return m;
}

template <class T, class X>
DTensor<T> cloneActivation(X& x, const DTensor<T>& t) {
  auto c = DTensor<T>::empty(x.pool(), t.rows(), t.cols());
  x.copy(c.data(), t.data(), t.size());
  return c;
}

template <class T, class X>
class DOp {
 public:
  explicit DOp(X& x) : x_(&x) {}
  virtual ~DOp() = default;
  virtual DTensor<T> forward(std::span<const DTensor<T>> in, DContext<T>* ctx, const DEnv& env) = 0;
  virtual void backward(const DContext<T>& ctx, const DTensor<T>& dout, std::span<DTensor<T>> din) = 0;
  virtual std::vector<DParam<T>*> params() { return {}; }
  virtual std::vector<DBuffer<T>*> buffers() { return {}; }

 protected:
  X& x() { return *x_; }
  DevicePool& pool() { return x_->pool(); }
  DTensor<T> activation(int64_t rows, int64_t cols) { return DTensor<T>::empty(pool(), rows, cols); }
  DTensor<T> workspace(int64_t rows, int64_t cols) { return DTensor<T>::untracked(pool(), rows, cols); }
  DParam<T> param(const HostMatrix<T>& m) {
    DParam<T> p{m.name, uploadMatrix(*x_, m), DTensor<T>::untracked(pool(), m.rows, m.cols)};
    x_->launch(p.grad.size(), Fill<T>{p.grad.data(), T(0)});
    return p;
  }

 private:
  X* x_;
};

// y = x W^T + b (reference/ops/linear.h).
template <class T, class X>
class DLinear final : public DOp<T, X> {
 public:
  DLinear(X& x, const DNodeDesc<T>& d)
      : DOp<T, X>(x), in_(d.inFeatures), out_(d.outFeatures), w_(this->param(d.params.at(0))), b_(this->param(d.params.at(1))) {}
  DTensor<T> forward(std::span<const DTensor<T>> in, DContext<T>* ctx, const DEnv& env) override {
    const int64_t n = in[0].rows();
    auto y = this->activation(n, out_);
    Gemm<T> g;
    g.transB = true;
    g.m = n, g.n = out_, g.k = in_;
    g.a = in[0].data(), g.lda = in_;
    g.b = w_.value.data(), g.ldb = in_;
    g.c = y.data(), g.ldc = out_;
    this->x().gemm(g);
    this->x().launch(y.size(), BiasAdd<T>{y.data(), b_.value.data(), out_});
    if (env.bf16Matmul) this->x().launch(y.size(), RoundToBf16<T>{y.data()});
    if (ctx) saveFields(*ctx, Saved{in[0]});
    return y;
  }
  void backward(const DContext<T>& ctx, const DTensor<T>& dout, std::span<DTensor<T>> din) override {
    const DTensor<T> xin = loadFields<Saved>(ctx).x;
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
    gx.b = w_.value.data(), gx.ldb = in_;
    gx.c = din[0].data(), gx.ldc = in_;
    this->x().gemm(gx);
  }
  std::vector<DParam<T>*> params() override { return {&w_, &b_}; }

 private:
  struct Saved {
    DTensor<T> x;
    auto fields() { return std::tie(x); }
  };
  int64_t in_, out_;
  DParam<T> w_, b_;
};

template <class T, class X>
class DRelu final : public DOp<T, X> {
 public:
  using DOp<T, X>::DOp;
  DTensor<T> forward(std::span<const DTensor<T>> in, DContext<T>* ctx, const DEnv&) override {
    auto y = this->activation(in[0].rows(), in[0].cols());
    this->x().launch(y.size(), ReluForward<T>{y.data(), in[0].data()});
    if (ctx) saveFields(*ctx, Saved{y});
    return y;
  }
  void backward(const DContext<T>& ctx, const DTensor<T>& dout, std::span<DTensor<T>> din) override {
    const DTensor<T> y = loadFields<Saved>(ctx).y;
    din[0] = this->activation(y.rows(), y.cols());
    this->x().launch(y.size(), ReluBackward<T>{din[0].data(), y.data(), dout.data()});
  }

 private:
  struct Saved {
    DTensor<T> y;  // the output
    auto fields() { return std::tie(y); }
  };
};

template <class T, class X>
class DTanh final : public DOp<T, X> {
 public:
  using DOp<T, X>::DOp;
  DTensor<T> forward(std::span<const DTensor<T>> in, DContext<T>* ctx, const DEnv&) override {
    auto y = this->activation(in[0].rows(), in[0].cols());
    this->x().launch(y.size(), TanhForward<T>{y.data(), in[0].data()});
    if (ctx) saveFields(*ctx, Saved{y});
    return y;
  }
  void backward(const DContext<T>& ctx, const DTensor<T>& dout, std::span<DTensor<T>> din) override {
    const DTensor<T> y = loadFields<Saved>(ctx).y;
    din[0] = this->activation(y.rows(), y.cols());
    this->x().launch(y.size(), TanhBackward<T>{din[0].data(), y.data(), dout.data()});
  }

 private:
  struct Saved {
    DTensor<T> y;  // the output
    auto fields() { return std::tie(y); }
  };
};

template <class T, class X>
class DGelu final : public DOp<T, X> {
 public:
  using DOp<T, X>::DOp;
  DTensor<T> forward(std::span<const DTensor<T>> in, DContext<T>* ctx, const DEnv& env) override {
    auto y = this->activation(in[0].rows(), in[0].cols());
    GeluForward<T> body{y.data(), in[0].data()};
    body.erfForm = env.erfGelu;
    this->x().launch(y.size(), body);
    if (ctx) saveFields(*ctx, Saved{in[0]});
    return y;
  }
  void backward(const DContext<T>& ctx, const DTensor<T>& dout, std::span<DTensor<T>> din) override {
    const DTensor<T> xin = loadFields<Saved>(ctx).x;
    din[0] = this->activation(xin.rows(), xin.cols());
    this->x().launch(xin.size(), GeluBackward<T>{din[0].data(), xin.data(), dout.data()});
  }

 private:
  struct Saved {
    DTensor<T> x;
    auto fields() { return std::tie(x); }
  };
};

// Inverted dropout (reference/ops/dropout.h); saves the scaled mask.
template <class T, class X>
class DDropout final : public DOp<T, X> {
 public:
  DDropout(X& x, double p) : DOp<T, X>(x), p_(p) {}
  DTensor<T> forward(std::span<const DTensor<T>> in, DContext<T>* ctx, const DEnv& env) override {
    const auto& xin = in[0];
    auto y = this->activation(xin.rows(), xin.cols());
    if (p_ == 0) {
      this->x().copy(y.data(), xin.data(), xin.size());
      return y;
    }
    const RngDraw d = env.draw(xin.size());
    const T scale = T(1) / (T(1) - static_cast<T>(p_));
    DTensor<T> mask = ctx ? this->activation(xin.rows(), xin.cols()) : DTensor<T>();
    this->x().launch(philoxBlocksFor(d.offset, xin.size()),
                     DropoutForward<T>{y.data(), mask.data(), xin.data(), xin.size(), drawPos(d), p_, scale});
    if (ctx) {
      saveFields(*ctx, Saved{mask});
      ctx->draw = d;
    }
    return y;
  }
  void backward(const DContext<T>& ctx, const DTensor<T>& dout, std::span<DTensor<T>> din) override {
    din[0] = this->activation(dout.rows(), dout.cols());
    if (p_ == 0) {
      this->x().copy(din[0].data(), dout.data(), dout.size());
      return;
    }
    this->x().launch(dout.size(), Multiply<T>{din[0].data(), dout.data(), loadFields<Saved>(ctx).mask.data()});
  }

 private:
  struct Saved {
    DTensor<T> mask;  // m / (1 - p)
    auto fields() { return std::tie(mask); }
  };
  double p_;
};

template <class T, class X>
class DAdd final : public DOp<T, X> {
 public:
  using DOp<T, X>::DOp;
  DTensor<T> forward(std::span<const DTensor<T>> in, DContext<T>*, const DEnv&) override {
    auto y = this->activation(in[0].rows(), in[0].cols());
    this->x().launch(y.size(), AddForward<T>{y.data(), in[0].data(), in[1].data()});
    return y;
  }
  void backward(const DContext<T>&, const DTensor<T>& dout, std::span<DTensor<T>> din) override {
    din[0] = cloneActivation(this->x(), dout);
    din[1] = cloneActivation(this->x(), dout);
  }
};

// Per-row LayerNorm (reference/ops/layernorm.h); saves its input, mean and rstd (N, 1).
template <class T, class X>
class DLayerNorm final : public DOp<T, X> {
 public:
  DLayerNorm(X& x, const DNodeDesc<T>& d)
      : DOp<T, X>(x), eps_(d.eps), w_(this->param(d.params.at(0))), b_(this->param(d.params.at(1))) {}
  DTensor<T> forward(std::span<const DTensor<T>> in, DContext<T>* ctx, const DEnv&) override {
    const auto& xin = in[0];
    const int64_t n = xin.rows(), c = xin.cols();
    auto y = this->activation(n, c);
    DTensor<T> mean = ctx ? this->activation(n, 1) : this->workspace(n, 1);
    DTensor<T> rstd = ctx ? this->activation(n, 1) : this->workspace(n, 1);
    this->x().launch(n, LayerNormForward<T>{y.data(), mean.data(), rstd.data(), xin.data(), w_.value.data(),
                                            b_.value.data(), c, static_cast<T>(eps_)});
    if (ctx) saveFields(*ctx, Saved{xin, mean, rstd});
    return y;
  }
  void backward(const DContext<T>& ctx, const DTensor<T>& dout, std::span<DTensor<T>> din) override {
    const auto s = loadFields<Saved>(ctx);
    const int64_t n = s.x.rows(), c = s.x.cols();
    din[0] = this->activation(n, c);
    this->x().launch(n, LayerNormBackwardInput<T>{din[0].data(), dout.data(), s.x.data(), s.mean.data(),
                                                  s.rstd.data(), w_.value.data(), c});
    this->x().launch(c, LayerNormBackwardParams<T>{w_.grad.data(), b_.grad.data(), dout.data(), s.x.data(),
                                                   s.mean.data(), s.rstd.data(), n, c});
  }
  std::vector<DParam<T>*> params() override { return {&w_, &b_}; }

 private:
  struct Saved {
    DTensor<T> x, mean, rstd;  // mean and rstd (N, 1)
    auto fields() { return std::tie(x, mean, rstd); }
  };

 private:
  double eps_;
  DParam<T> w_, b_;
};

// BatchNorm1d in training mode (reference/ops/batchnorm.h); saves its input, mean and rstd (1, C).
template <class T, class X>
class DBatchNorm final : public DOp<T, X> {
 public:
  DBatchNorm(X& x, const DNodeDesc<T>& d)
      : DOp<T, X>(x),
        eps_(d.eps),
        momentum_(d.momentum),
        w_(this->param(d.params.at(0))),
        b_(this->param(d.params.at(1))),
        runningMean_{d.buffers.at(0).name, uploadMatrix(x, d.buffers.at(0))},
        runningVar_{d.buffers.at(1).name, uploadMatrix(x, d.buffers.at(1))},
        numBatches_{d.buffers.at(2).name, uploadMatrix(x, d.buffers.at(2))} {}
  DTensor<T> forward(std::span<const DTensor<T>> in, DContext<T>* ctx, const DEnv&) override {
    const auto& xin = in[0];
    const int64_t n = xin.rows(), c = xin.cols();
    if (n < 2)
      throw std::invalid_argument("batchnorm: training mode needs at least 2 rows per batch, got " +
                                  std::to_string(n));
    auto y = this->activation(n, c);
    DTensor<T> mean = ctx ? this->activation(1, c) : this->workspace(1, c);
    DTensor<T> rstd = ctx ? this->activation(1, c) : this->workspace(1, c);
    this->x().launch(c, BatchNormForward<T>{y.data(), mean.data(), rstd.data(), runningMean_.value.data(),
                                            runningVar_.value.data(), numBatches_.value.data(), xin.data(),
                                            w_.value.data(), b_.value.data(), n, c, static_cast<T>(eps_),
                                            static_cast<T>(momentum_)});
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
  struct Saved {
    DTensor<T> x, mean, rstd;  // mean and rstd (1, C)
    auto fields() { return std::tie(x, mean, rstd); }
  };
  double eps_, momentum_;
  DParam<T> w_, b_;
  DBuffer<T> runningMean_, runningVar_, numBatches_;
};

// Causal multi-head self-attention on fused qkv (B*T, 3C) (reference/ops/attention.h). Per sequence b, one
// strided-batched GEMM over the H heads for each product; softmax, dropout and the softmax backward are row /
// element bodies. Saves its input, the probabilities (B*H*T, T) and, when p > 0, the scaled mask.
template <class T, class X>
class DAttention final : public DOp<T, X> {
 public:
  DAttention(X& x, const DNodeDesc<T>& d) : DOp<T, X>(x), heads_(d.heads), seq_(d.seq), p_(d.p) {}

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
    for (int64_t b = 0; b < d.batch; ++b) {  // scores = q k^T
      const T* base = qkv.data() + b * seq_ * 3 * d.c;
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
    for (int64_t b = 0; b < d.batch; ++b) {  // out = P' v
      const T* v = qkv.data() + b * seq_ * 3 * d.c + 2 * d.c;
      this->x().gemm(headGemm(kept.data() + b * heads_ * seq_ * seq_, seq_, seq_ * seq_, false, v, 3 * d.c, d.hd,
                              false, out.data() + b * seq_ * d.c, d.c, d.hd, seq_, d.hd, seq_));
    }
    if (ctx) {
      saveFields(*ctx, Saved{qkv, probs, mask});  // mask stays undefined, and unsaved, when p = 0
      ctx->draw = draw;
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
    auto dp = this->workspace(bht, seq_);
    for (int64_t b = 0; b < d.batch; ++b) {  // dP' = dout v^T
      const T* v = qkv.data() + b * seq_ * 3 * d.c + 2 * d.c;
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
    for (int64_t b = 0; b < d.batch; ++b) {  // dv = P'^T dout
      const T* g = dout.data() + b * seq_ * d.c;
      this->x().gemm(headGemm(kept.data() + b * heads_ * seq_ * seq_, seq_, seq_ * seq_, true, g, d.c, d.hd, false,
                              din[0].data() + b * seq_ * 3 * d.c + 2 * d.c, 3 * d.c, d.hd, seq_, d.hd, seq_));
    }
    this->x().launch(bht, SoftmaxBackward<T>{dp.data(), att.data(), seq_, scale});
    for (int64_t b = 0; b < d.batch; ++b) {  // dq = dS k, dk = dS^T q
      const T* q = qkv.data() + b * seq_ * 3 * d.c;
      const T* ds = dp.data() + b * heads_ * seq_ * seq_;
      T* dq = din[0].data() + b * seq_ * 3 * d.c;
      this->x().gemm(headGemm(ds, seq_, seq_ * seq_, false, q + d.c, 3 * d.c, d.hd, false, dq, 3 * d.c, d.hd, seq_,
                              d.hd, seq_));
      this->x().gemm(headGemm(ds, seq_, seq_ * seq_, true, q, 3 * d.c, d.hd, false, dq + d.c, 3 * d.c, d.hd, seq_,
                              d.hd, seq_));
    }
  }

 private:
  struct Saved {
    DTensor<T> qkv;
    DTensor<T> probs;  // P, (batch heads seq, seq)
    DTensor<T> mask;   // the dropout mask over P, scaled; only when p > 0
    auto fields() { return std::tie(qkv, probs, mask); }
  };
  struct Dims {
    int64_t batch, c, hd;
  };
  Dims dims(const DTensor<T>& in) const {
    if (in.cols() % 3 != 0 || (in.cols() / 3) % heads_ != 0 || in.rows() % seq_ != 0)
      throw std::invalid_argument("attention: input must be (B*" + std::to_string(seq_) +
                                  ", 3C) with C divisible by " + std::to_string(heads_) + " heads");
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

template <class T, class X>
std::unique_ptr<DOp<T, X>> makeDeviceOp(X& x, const DNodeDesc<T>& d) {
  switch (d.kind) {
    case DOpKind::kLinear: return std::make_unique<DLinear<T, X>>(x, d);
    case DOpKind::kRelu: return std::make_unique<DRelu<T, X>>(x);
    case DOpKind::kGelu: return std::make_unique<DGelu<T, X>>(x);
    case DOpKind::kTanh: return std::make_unique<DTanh<T, X>>(x);
    case DOpKind::kDropout: return std::make_unique<DDropout<T, X>>(x, d.p);
    case DOpKind::kAdd: return std::make_unique<DAdd<T, X>>(x);
    case DOpKind::kLayerNorm: return std::make_unique<DLayerNorm<T, X>>(x, d);
    case DOpKind::kBatchNorm: return std::make_unique<DBatchNorm<T, X>>(x, d);
    case DOpKind::kAttention: return std::make_unique<DAttention<T, X>>(x, d);
  }
  throw std::logic_error("makeDeviceOp: unknown op kind");
}

// The chain's loss on the device. forward leaves the loss value in a device scalar (read at the end of the
// step, so the step has no host synchronisation in the middle); backward returns a fresh dL/dx.
template <class T, class X>
class DLoss {
 public:
  DLoss(X& x, const DLossDesc<T>& d, int64_t rows, int64_t cols)
      : x_(&x), kind_(d.kind), rows_(rows), cols_(cols), value_(DTensor<T>::untracked(x.pool(), 1, 1)) {
    if (kind_ == DLossKind::kCrossEntropy) {
      if (static_cast<int64_t>(d.labels.size()) != rows)
        throw std::invalid_argument("cross_entropy: " + std::to_string(d.labels.size()) + " labels for " +
                                    std::to_string(rows) + " rows");
      for (int l : d.labels)
        if (l < 0 || l >= cols)
          throw std::invalid_argument("cross_entropy: label " + std::to_string(l) + " outside [0, " +
                                      std::to_string(cols) + ")");
      labels_ = DTensor<int>::untracked(x.pool(), 1, rows);
      x.upload(labels_.data(), d.labels.data(), rows);
    } else {
      target_ = uploadMatrix(x, d.target);
    }
  }
  const DTensor<T>& value() const { return value_; }

  void forward(const DTensor<T>& xin, DContext<T>* ctx) {
    auto terms = DTensor<T>::untracked(x_->pool(), rows_, 1);
    if (kind_ == DLossKind::kCrossEntropy) {
      DTensor<T> probs = ctx ? DTensor<T>::empty(x_->pool(), rows_, cols_) : DTensor<T>::untracked(x_->pool(), rows_, cols_);
      x_->launch(rows_, CrossEntropyForwardRow<T>{probs.data(), terms.data(), xin.data(), labels(), cols_});
      x_->launch(1, SumRows<T>{value_.data(), terms.data(), rows_, static_cast<T>(rows_)});
      if (ctx) saveFields(*ctx, Saved{probs});
    } else {
      x_->launch(rows_, MseForwardRow<T>{terms.data(), xin.data(), target_.data(), cols_});
      x_->launch(1, SumRows<T>{value_.data(), terms.data(), rows_, static_cast<T>(rows_ * cols_)});
      if (ctx) saveFields(*ctx, Saved{xin});
    }
  }

  DTensor<T> backward(const DContext<T>& ctx) {
    auto dx = DTensor<T>::empty(x_->pool(), rows_, cols_);
    if (kind_ == DLossKind::kCrossEntropy) {
      x_->launch(dx.size(), CrossEntropyBackward<T>{dx.data(), loadFields<Saved>(ctx).operand.data(), labels(), cols_,
                                                    T(1) / static_cast<T>(rows_)});
    } else {
      x_->launch(dx.size(), MseBackward<T>{dx.data(), loadFields<Saved>(ctx).operand.data(), target_.data(),
                                           T(2) / static_cast<T>(rows_ * cols_)});
    }
    return dx;
  }

 private:
  struct Saved {
    DTensor<T> operand;  // cross-entropy: the softmax of the logits; mse: the input
    auto fields() { return std::tie(operand); }
  };
  const int* labels() const { return labels_.data(); }
  X* x_;
  DLossKind kind_;
  int64_t rows_, cols_;
  DTensor<T> value_;
  DTensor<int> labels_;
  DTensor<T> target_;
};

}  // namespace ckpt::gpu
