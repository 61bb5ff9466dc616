// A loss: a scalar reduction of the chain's output (each loss documents its mean). forward saves into ctx what backward
// needs; backward returns a fresh dL/dx. Targets are fixed at construction (they are part of the case, not
// activations).
#pragma once
#include <memory>
#include <vector>

#include "reference/op.h"

namespace ckpt {

template <class T>
class Loss {
 public:
  virtual ~Loss() = default;
  virtual std::string kind() const = 0;
  // meta.out is {1, 1} but no output tensor is allocated (forward returns a scalar); contextExtraBytes and
  // savesInputs are as for an op with one input.
  virtual OpMeta meta(Shape in) const = 0;
  virtual T forward(const Tensor<T>& x, Context<T>* ctx) = 0;
  virtual Tensor<T> backward(const Context<T>& ctx) = 0;
  // The loss of one micro-batch (cases/micro_batches.h): the targets of rows [firstRow, firstRow + rows), its
  // value divided by `divisor` (the number of micro-batches) and its gradient scaled by 1 / divisor, as
  // `(loss / M).backward()`.
  virtual std::unique_ptr<Loss<T>> microBatch(int64_t firstRow, int64_t rows, int64_t divisor) const = 0;
  // A loss with parameters (the LM head, reference/ops/lm_head.h): shared by every micro-batch's loss.
  virtual std::vector<Param<T>*> params() { return {}; }
};

// The division of a micro-batch's loss by the number of micro-batches M and its gradient's scaling by 1/M (the
// backward of `loss / M`); nothing, and no FLOPs, with one micro-batch.
template <class T>
struct LossDivisor {
  int64_t m = 1;
  T value(T v) const { return m > 1 ? v / static_cast<T>(m) : v; }
  void gradient(Tensor<T>& dx) const {
    if (m > 1) dx.map() *= T(1) / static_cast<T>(m);
  }
  void count(OpMeta& meta, Shape in) const {
    if (m <= 1) return;
    meta.forwardFlops += 1;
    meta.backwardFlops += in.size() + 1;
  }
};

}  // namespace ckpt
