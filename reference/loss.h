// A loss: a scalar reduction of the chain's output (each loss documents its mean). forward saves into ctx what backward needs; backward
// returns a fresh dL/dx. Targets are fixed at construction (they are part of the case, not activations).
#pragma once
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
};

}  // namespace ckpt
