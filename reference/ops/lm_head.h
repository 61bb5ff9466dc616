// The LM head of a language-model case (cases/lm_case.h), which is its loss: h = LayerNorm(x_L), logits = h W^T
// (W (vocab, width), no bias), cross-entropy over the vocabulary, the mean over rows. The LayerNorm is
// PyTorch's (biased variance, eps 1e-5, statistics as in reference/ops/layernorm.h) and the cross-entropy is
// reference/ops/cross_entropy.h's.
//
// It allocates exactly what the planner's loss model charges (harness/engine/planner.cpp): a context of x_L
// (shared) plus one block of extras {h, mean, rstd, probabilities}, then g_L. The logits are computed into the
// probabilities' buffer and the probabilities turned into dlogits in place; dh is computed into g_L's buffer and
// the LayerNorm backward runs in place, row by row.
//
// The parameters belong to the case, not to one micro-batch: every micro-batch's head shares them.
#pragma once
#include <cmath>
#include <memory>
#include <stdexcept>
#include <vector>

#include "reference/loss.h"
#include "reference/saved_fields.h"

namespace ckpt {

template <class T>
struct LmHeadParams {
  LmHeadParams(int64_t vocab, int64_t width)
      : lnWeight{"head.ln.weight", Mat<T>::Ones(1, width), Mat<T>::Zero(1, width)},
        lnBias{"head.ln.bias", Mat<T>::Zero(1, width), Mat<T>::Zero(1, width)},
        weight{"head.weight", Mat<T>::Zero(vocab, width), Mat<T>::Zero(vocab, width), true} {}
  Param<T> lnWeight, lnBias, weight;
};

template <class T>
class LmHeadLoss final : public Loss<T> {
 public:
  // `trainsWeight`: W takes a gradient (false for a tied head whose embedding is frozen: PyTorch computes no
  // gradient for a weight that requires none, and neither does this head).
  LmHeadLoss(std::shared_ptr<LmHeadParams<T>> p, std::vector<int> labels, bool trainsWeight, int64_t divisor = 1)
      : p_(std::move(p)), labels_(std::move(labels)), trainsWeight_(trainsWeight), divisor_{divisor} {}
  std::string kind() const override { return "lm_head"; }
  const std::vector<int>& labels() const { return labels_; }
  int64_t vocab() const { return p_->weight.value.rows(); }

  // LayerNorm as reference/ops/layernorm.h counts it; the logits' product 2 n V c; cross-entropy as
  // reference/ops/cross_entropy.h counts it over V classes. Backward: dlogits (n V + n), dW += dlogits^T h
  // (2 n V c, when W trains), dh = dlogits W (2 n V c), the LayerNorm's backward.
  OpMeta meta(Shape in) const override {
    const int64_t n = in.rows, c = in.cols, v = vocab();
    OpMeta m;
    m.out = {1, 1};
    m.forwardFlops = (8 * n * c + 5 * n) + 2 * n * v * c + (5 * n * v + 4 * n + 1);
    m.backwardFlops = (n * v + n) + (trainsWeight_ ? 2 * n * v * c : 0) + 2 * n * v * c + (13 * n * c + 2 * n + 2 * c);
    m.savesInputs = true;
    m.contextExtraBytes = (n * c + 2 * n + n * v) * static_cast<int64_t>(sizeof(T));
    divisor_.count(m, Shape{n, v});
    return m;
  }

  T forward(const Tensor<T>& x, Context<T>* ctx) override {
    check(x);
    const int64_t n = x.rows(), c = x.cols(), v = vocab();
    Saved s{x, {}, {}, {}, {}};
    Mat<T> hW, meanW, rstdW, probsW;
    auto buffer = [&](Tensor<T>& t, Mat<T>& w, int64_t cols) {
      if (ctx) t = Tensor<T>::empty(n, cols);
      else w.resize(n, cols);
      return ctx ? t.data() : w.data();
    };
    typename Tensor<T>::Map h(buffer(s.h, hW, c), n, c);
    T* mean = buffer(s.mean, meanW, 1);
    T* rstd = buffer(s.rstd, rstdW, 1);
    typename Tensor<T>::Map probs(buffer(s.probs, probsW, v), n, v);
    const auto xm = x.map();
    const T invC = T(1) / static_cast<T>(c);
    const auto &g = p_->lnWeight.value, &b = p_->lnBias.value;
    for (int64_t r = 0; r < n; ++r) {
      mean[r] = xm.row(r).sum() * invC;
      const T var = (xm.row(r).array() - mean[r]).square().sum() * invC;
      rstd[r] = T(1) / std::sqrt(var + static_cast<T>(1e-5));
      h.row(r) = ((xm.row(r).array() - mean[r]) * rstd[r] * g.row(0).array() + b.row(0).array()).matrix();
    }
    probs.noalias() = h * p_->weight.value.transpose();  // the logits, for now
    T total = 0;
    for (int64_t r = 0; r < n; ++r) {
      const T mx = probs.row(r).maxCoeff();
      const T atLabel = probs(r, labels_[static_cast<size_t>(r)]);
      probs.row(r) = (probs.row(r).array() - mx).exp().matrix();
      const T sum = probs.row(r).sum();
      probs.row(r) /= sum;
      total += std::log(sum) - (atLabel - mx);
    }
    if (ctx) saveFields(*ctx, s);
    return divisor_.value(total / static_cast<T>(n));
  }

  Tensor<T> backward(const Context<T>& ctx) override {
    Saved s = loadFields<Saved>(ctx);
    const int64_t n = s.x.rows(), c = s.x.cols();
    const T invN = T(1) / static_cast<T>(n), invC = T(1) / static_cast<T>(c);
    auto dlogits = s.probs.map();  // the probabilities become dlogits in place
    for (int64_t r = 0; r < n; ++r) dlogits(r, labels_[static_cast<size_t>(r)]) -= T(1);
    dlogits *= invN;
    divisor_.gradient(s.probs);
    if (trainsWeight_) p_->weight.grad.noalias() += dlogits.transpose() * s.h.map();
    auto dx = Tensor<T>::empty(n, c);
    auto d = dx.map();
    d.noalias() = dlogits * p_->weight.value;  // dh, turned into dx row by row below
    const auto xm = s.x.map();
    const T* mean = s.mean.data();
    const T* rstd = s.rstd.data();
    const auto& gamma = p_->lnWeight.value;
    Eigen::Array<T, 1, Eigen::Dynamic> xhat(c), dnorm(c);
    Eigen::Array<T, 1, Eigen::Dynamic> dweight = Eigen::Array<T, 1, Eigen::Dynamic>::Zero(c), dbias = dweight;
    for (int64_t r = 0; r < n; ++r) {
      xhat = (xm.row(r).array() - mean[r]) * rstd[r];
      dnorm = d.row(r).array() * gamma.row(0).array();
      dweight += d.row(r).array() * xhat;
      dbias += d.row(r).array();
      const T dnormMean = dnorm.sum() * invC;
      const T dnormXhatMean = (dnorm * xhat).sum() * invC;
      d.row(r) = ((dnorm - dnormMean - xhat * dnormXhatMean) * rstd[r]).matrix();
    }
    p_->lnWeight.grad.row(0).array() += dweight;
    p_->lnBias.grad.row(0).array() += dbias;
    return dx;
  }

  std::unique_ptr<Loss<T>> microBatch(int64_t firstRow, int64_t rows, int64_t divisor) const override {
    const auto from = labels_.begin() + static_cast<std::ptrdiff_t>(firstRow);
    return std::make_unique<LmHeadLoss<T>>(p_, std::vector<int>(from, from + static_cast<std::ptrdiff_t>(rows)),
                                           trainsWeight_, divisor);
  }

  std::vector<Param<T>*> params() override { return {&p_->lnWeight, &p_->lnBias, &p_->weight}; }

 private:
  struct Saved {
    Tensor<T> x, h, mean, rstd, probs;  // x_L, the normalised rows, (n, 1) statistics, softmax of the logits
    auto fields() { return std::tie(x, h, mean, rstd, probs); }
  };
  void check(const Tensor<T>& x) const {
    if (static_cast<int64_t>(labels_.size()) != x.rows())
      throw std::invalid_argument("lm_head: " + std::to_string(labels_.size()) + " labels for " +
                                  std::to_string(x.rows()) + " rows");
    if (x.cols() != p_->weight.value.cols())
      throw std::invalid_argument("lm_head: input width " + std::to_string(x.cols()) + ", head width " +
                                  std::to_string(p_->weight.value.cols()));
    for (int l : labels_)
      if (l < 0 || l >= vocab())
        throw std::invalid_argument("lm_head: label " + std::to_string(l) + " outside [0, " + std::to_string(vocab()) +
                                    ")");
  }

  std::shared_ptr<LmHeadParams<T>> p_;
  std::vector<int> labels_;
  bool trainsWeight_;
  LossDivisor<T> divisor_;
};

}  // namespace ckpt
