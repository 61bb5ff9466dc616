// Mean squared error against a fixed target, the mean over all N*K elements (PyTorch's MSELoss, reduction
// "mean"): L = 1/(N K) sum (x - target)^2; dL/dx = 2 (x - target) / (N K). Saves its input.
#pragma once
#include <stdexcept>

#include "reference/loss.h"
#include "reference/saved_fields.h"
#include "reference/saved_contexts.h"

namespace ckpt {

template <class T>
class MseLoss final : public Loss<T> {
 public:
  explicit MseLoss(Mat<T> target, int64_t divisor = 1) : target_(std::move(target)), divisor_{divisor} {}
  std::string kind() const override { return "mse"; }
  const Mat<T>& target() const { return target_; }

  // Forward per element: subtract, square, sum (3), then one division; backward per element: subtract, scale
  // (2), the scale computed once.
  OpMeta meta(Shape in) const override {
    OpMeta m;
    m.out = {1, 1};
    m.forwardFlops = 3 * in.size() + 1;
    m.backwardFlops = 2 * in.size() + 1;
    m.savesInputs = true;
    divisor_.count(m, in);
    return m;
  }

  T forward(const Tensor<T>& x, Context<T>* ctx) override {
    if (x.rows() != target_.rows() || x.cols() != target_.cols())
      throw std::invalid_argument("mse: input (" + std::to_string(x.rows()) + ", " + std::to_string(x.cols()) +
                                  ") does not match the target (" + std::to_string(target_.rows()) + ", " +
                                  std::to_string(target_.cols()) + ")");
    const T loss = (x.map() - target_).squaredNorm() / static_cast<T>(x.size());
    if (ctx) saveFields(*ctx, Saved{x});
    return divisor_.value(loss);
  }

  Tensor<T> backward(const Context<T>& ctx) override {
    const Tensor<T> x = loadFields<Saved>(ctx).x;
    auto dx = Tensor<T>::empty(x.rows(), x.cols());
    dx.map() = (x.map() - target_) * (T(2) / static_cast<T>(x.size()));
    divisor_.gradient(dx);
    return dx;
  }

  std::unique_ptr<Loss<T>> microBatch(int64_t firstRow, int64_t rows, int64_t divisor) const override {
    return std::make_unique<MseLoss<T>>(target_.middleRows(firstRow, rows), divisor);
  }

 private:
  using Saved = InputSaved<Tensor<T>>;
  Mat<T> target_;
  LossDivisor<T> divisor_;
};

}  // namespace ckpt
