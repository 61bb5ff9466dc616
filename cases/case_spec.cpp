#include "cases/case_spec.h"

#include "cases/block_kind.h"

namespace ckpt {
const char* blockKindName(BlockKind k) { return k->name; }
const char* activationName(Activation a) {
  switch (a) {
    case Activation::kRelu:
      return "relu";
    case Activation::kGelu:
      return "gelu";
    case Activation::kTanh:
      return "tanh";
    case Activation::kRrelu:
      return "rrelu";
  }
  return "?";
}
const char* lossKindName(LossKind k) { return k == LossKind::kCrossEntropy ? "cross_entropy" : "mse"; }
const char* dtypeName(DType d) { return d == DType::kFloat ? "float" : "double"; }
}  // namespace ckpt
