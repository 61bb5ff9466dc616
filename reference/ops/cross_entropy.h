// Softmax cross-entropy against integer labels, the mean over rows: L = -1/N sum_r log softmax(x_r)[label_r],
// with each row shifted by its max so exp never overflows (PyTorch's CrossEntropyLoss, reduction "mean").
// Saves the probabilities (N, K) as its one extra; dL/dx = (P - onehot) / N.
#pragma once
#include <cmath>
#include <stdexcept>
#include <vector>

#include "reference/loss.h"
#include "reference/saved_fields.h"

namespace ckpt {

template <class T>
class CrossEntropyLoss final : public Loss<T> {
 public:
  explicit CrossEntropyLoss(std::vector<int> labels, int64_t divisor = 1)
      : labels_(std::move(labels)), divisor_{divisor} {}
  std::string kind() const override { return "cross_entropy"; }
  const std::vector<int>& labels() const { return labels_; }

  // As written below. Forward per element: max, subtract, exp, sum, divide (5); per row: log, two subtractions,
  // accumulate (4); one final division. Backward: the label subtraction per row, the 1/N scaling per element.
  OpMeta meta(Shape in) const override {
    OpMeta m;
    m.out = {1, 1};
    m.forwardFlops = 5 * in.size() + 4 * in.rows + 1;
    m.backwardFlops = in.size() + in.rows;
    m.contextExtraBytes = in.size() * static_cast<int64_t>(sizeof(T));
    divisor_.count(m, in);
    return m;
  }

  T forward(const Tensor<T>& x, Context<T>* ctx) override {
    check(x);
    const int64_t n = x.rows(), k = x.cols();
    Tensor<T> probsT;
    Mat<T> probsW;
    if (ctx) probsT = Tensor<T>::empty(n, k);
    else probsW.resize(n, k);
    auto probs = ctx ? probsT.map() : typename Tensor<T>::Map(probsW.data(), n, k);
    const auto xm = x.map();
    T total = 0;
    for (int64_t r = 0; r < n; ++r) {
      const T mx = xm.row(r).maxCoeff();
      probs.row(r) = (xm.row(r).array() - mx).exp().matrix();
      const T sum = probs.row(r).sum();
      probs.row(r) /= sum;
      // log softmax at the label from the shifted logits, not log(p), so a tiny p loses no precision.
      total += std::log(sum) - (xm(r, labels_[static_cast<size_t>(r)]) - mx);
    }
    if (ctx) saveFields(*ctx, Saved{probsT});
    return divisor_.value(total / static_cast<T>(n));
  }

  Tensor<T> backward(const Context<T>& ctx) override {
    const Tensor<T> probs = loadFields<Saved>(ctx).probs;
    const int64_t n = probs.rows();
    const T invN = T(1) / static_cast<T>(n);
    auto dx = Tensor<T>::empty(n, probs.cols());
    auto g = dx.map();
    g = probs.map();
    for (int64_t r = 0; r < n; ++r) g(r, labels_[static_cast<size_t>(r)]) -= T(1);
    g *= invN;
    divisor_.gradient(dx);
    return dx;
  }

  std::unique_ptr<Loss<T>> microBatch(int64_t firstRow, int64_t rows, int64_t divisor) const override {
    const auto from = labels_.begin() + static_cast<std::ptrdiff_t>(firstRow);
    return std::make_unique<CrossEntropyLoss<T>>(std::vector<int>(from, from + static_cast<std::ptrdiff_t>(rows)),
                                                 divisor);
  }

 private:
  struct Saved {
    Tensor<T> probs;  // softmax of the logits
    auto fields() { return std::tie(probs); }
  };
  void check(const Tensor<T>& x) const {
    if (static_cast<int64_t>(labels_.size()) != x.rows())
      throw std::invalid_argument("cross_entropy: " + std::to_string(labels_.size()) + " labels for " +
                                  std::to_string(x.rows()) + " rows");
    for (int l : labels_)
      if (l < 0 || l >= x.cols())
        throw std::invalid_argument("cross_entropy: label " + std::to_string(l) + " outside [0, " +
                                    std::to_string(x.cols()) + ")");
  }

  std::vector<int> labels_;
  LossDivisor<T> divisor_;
};

}  // namespace ckpt
