// The device ops: deviceOps() lists them, one line each, and makeDeviceOp builds a node's op by its reference
// kind(); each op is a file in device/dops/ on the shared base device/dop.h. Also the device
// loss (DLoss).
#pragma once
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "device/dop.h"
#include "device/dops/add.h"
#include "device/dops/attention.h"
#include "device/dops/batchnorm.h"
#include "device/dops/drop_path.h"
#include "device/dops/dropout.h"
#include "device/dops/gelu.h"
#include "device/dops/layernorm.h"
#include "device/dops/linear.h"
#include "device/dops/lm_head.h"
#include "device/dops/moe.h"
#include "device/dops/relu.h"
#include "device/dops/rrelu.h"
#include "device/dops/tanh.h"
#include "device/kernels/loss.cuh"

namespace ckpt::gpu {

// The device ops, one line each in the order of reference/op_table.cpp, named by the reference op's kind(); each
// reads its attributes from the node's OpNode (DNodeDesc::node), as that table's line does.
template <class T, class X>
struct DeviceOpEntry {
  const char* kind;
  std::unique_ptr<DOp<T, X>> (*make)(X& x, const DNodeDesc<T>& d);
};

template <class T, class X>
const std::vector<DeviceOpEntry<T, X>>& deviceOps() {
  using D = const DNodeDesc<T>&;
  using P = std::unique_ptr<DOp<T, X>>;
  static const std::vector<DeviceOpEntry<T, X>> table = {
      {"linear", [](X& x, D d) -> P { return std::make_unique<DLinear<T, X>>(x, d); }},
      {"gelu", [](X& x, D) -> P { return std::make_unique<DGelu<T, X>>(x); }},
      {"relu", [](X& x, D) -> P { return std::make_unique<DRelu<T, X>>(x); }},
      {"tanh", [](X& x, D) -> P { return std::make_unique<DTanh<T, X>>(x); }},
      {"dropout", [](X& x, D d) -> P { return std::make_unique<DDropout<T, X>>(x, d.node.p); }},
      {"batchnorm", [](X& x, D d) -> P { return std::make_unique<DBatchNorm<T, X>>(x, d); }},
      {"layernorm", [](X& x, D d) -> P { return std::make_unique<DLayerNorm<T, X>>(x, d); }},
      {"attention", [](X& x, D d) -> P { return std::make_unique<DAttention<T, X>>(x, d); }},
      {"add", [](X& x, D) -> P { return std::make_unique<DAdd<T, X>>(x); }},
      {"drop_path", [](X& x, D d) -> P { return std::make_unique<DDropPath<T, X>>(x, d); }},
      {"rrelu", [](X& x, D d) -> P { return std::make_unique<DRrelu<T, X>>(x, d); }},
      {"moe", [](X& x, D d) -> P { return std::make_unique<DMoe<T, X>>(x, d); }},
  };
  return table;
}

template <class T, class X>
std::unique_ptr<DOp<T, X>> makeDeviceOp(X& x, const DNodeDesc<T>& d) {
  for (const auto& e : deviceOps<T, X>())
    if (d.node.op == e.kind) return e.make(x, d);
  throw std::invalid_argument("device backend: no device op for reference op kind '" + d.node.op + "'");
}

// The chain's loss on the device. forward leaves the loss value in a device scalar (read at the end of the
// step, so the step has no host synchronisation in the middle); backward returns a fresh dL/dx. A kLmHead loss
// runs the LM head (dops/lm_head.h) over `head`, the parameters every micro-batch's loss shares.
template <class T, class X>
class DLoss {
 public:
  DLoss(X& x, const DLossDesc<T>& d, int64_t rows, int64_t cols, DLmHead<T>* head = nullptr)
      : x_(&x),
        kind_(d.kind),
        rows_(rows),
        cols_(cols),
        divisor_(d.divisor),
        head_(head),
        value_(DTensor<T>::untracked(x.pool(), 1, 1)) {
    if (kind_ == DLossKind::kLmHead && !head_) throw std::invalid_argument("lm_head: a device loss without its head");
    if (kind_ != DLossKind::kMse) {
      const int64_t classes = kind_ == DLossKind::kLmHead ? head_->vocab() : cols;
      if (static_cast<int64_t>(d.labels.size()) != rows)
        throw std::invalid_argument("cross_entropy: " + std::to_string(d.labels.size()) + " labels for " +
                                    std::to_string(rows) + " rows");
      for (int l : d.labels)
        if (l < 0 || l >= classes)
          throw std::invalid_argument("cross_entropy: label " + std::to_string(l) + " outside [0, " +
                                      std::to_string(classes) + ")");
      labels_ = DTensor<int>::untracked(x.pool(), 1, rows);
      x.upload(labels_.data(), d.labels.data(), rows);
    } else {
      target_ = uploadMatrix(x, d.target);
    }
  }
  const DTensor<T>& value() const { return value_; }

  void forward(const DTensor<T>& xin, DContext<T>* ctx) {
    auto terms = DTensor<T>::untracked(x_->pool(), rows_, 1);
    if (kind_ == DLossKind::kLmHead) {
      lmHeadForward(*x_, *head_, xin, labels(), terms.data(), value_.data(), ctx);
    } else if (kind_ == DLossKind::kCrossEntropy) {
      DTensor<T> probs =
          ctx ? DTensor<T>::empty(x_->pool(), rows_, cols_) : DTensor<T>::untracked(x_->pool(), rows_, cols_);
      x_->launch(rows_, CrossEntropyForwardRow<T>{probs.data(), terms.data(), xin.data(), labels(), cols_});
      x_->launch(1, SumRows<T>{value_.data(), terms.data(), rows_, static_cast<T>(rows_)});
      if (ctx) saveFields(*ctx, Saved{probs});
    } else {
      x_->launch(rows_, MseForwardRow<T>{terms.data(), xin.data(), target_.data(), cols_});
      x_->launch(1, SumRows<T>{value_.data(), terms.data(), rows_, static_cast<T>(rows_ * cols_)});
      if (ctx) saveFields(*ctx, Saved{xin});
    }
    if (divisor_ > 1) x_->launch(1, DivideBy<T>{value_.data(), static_cast<T>(divisor_)});
  }

  DTensor<T> backward(const DContext<T>& ctx) {
    // The head scales dlogits by 1/M itself, before its products, as the reference head does.
    if (kind_ == DLossKind::kLmHead) return lmHeadBackward(*x_, *head_, ctx, labels(), divisor_);
    auto dx = DTensor<T>::empty(x_->pool(), rows_, cols_);
    if (kind_ == DLossKind::kCrossEntropy) {
      x_->launch(dx.size(), CrossEntropyBackward<T>{dx.data(), loadFields<Saved>(ctx).operand.data(), labels(), cols_,
                                                    T(1) / static_cast<T>(rows_)});
    } else {
      x_->launch(dx.size(), MseBackward<T>{dx.data(), loadFields<Saved>(ctx).operand.data(), target_.data(),
                                           T(2) / static_cast<T>(rows_ * cols_)});
    }
    if (divisor_ > 1) x_->launch(dx.size(), ScaleBy<T>{dx.data(), T(1) / static_cast<T>(divisor_)});
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
  int64_t divisor_;
  DLmHead<T>* head_;  // kLmHead: the chain's head
  DTensor<T> value_;
  DTensor<int> labels_;
  DTensor<T> target_;
};

}  // namespace ckpt::gpu
