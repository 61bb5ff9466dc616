// Runs a generic lambda with the scalar type a case asks for: f(float{}) or f(double{}).
#pragma once
#include "cases/case_spec.h"

namespace ckpt {
template <class F>
decltype(auto) withScalar(DType d, F&& f) {
  if (d == DType::kFloat) return f(float{});
  return f(double{});
}
}  // namespace ckpt
