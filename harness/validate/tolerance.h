// The one home of check 2's tolerance (PROTOCOL.md): how far an adapter's plain run, dropout off, may be from
// ckptcheck's reference and still count as a faithful translation of the case. Per tensor and step:
//   max |adapter - reference| <= tol * max(max |reference|, kReferenceFloor * S)
// where S is the largest magnitude among that step's tensors of the same kind (every parameter gradient and the
// input gradient; every state buffer). The floor matters for tensors that are zero up to rounding (a Linear bias
// feeding BatchNorm has an exactly-zero gradient in exact arithmetic), whose own relative error means nothing.
// Check 2 runs in double whenever the adapter runs double: different kernels sum in different orders, and an
// ill-conditioned case (BatchNorm over two nearly equal rows) amplifies that rounding by orders of magnitude,
// which in float would force a tolerance loose enough to hide a wrong translation. A wrong translation (a
// transposed weight, another GELU, a missing scale) is off by O(1).
#pragma once

namespace ckpt {

inline constexpr double kReferenceTolDouble = 1e-7;
inline constexpr double kReferenceTolFloat = 1e-2;  // only for adapters that cannot run double
inline constexpr double kReferenceFloor = 1e-3;
// In float (adapters that cannot run double), a tensor below a tenth of the gradients around it is judged
// against 1e-3 of them (kReferenceTolFloat x this): float leaves such tensors noise-dominated wherever the block
// cancels large terms (BatchNorm over two rows: a Linear bias before it, exactly zero in exact arithmetic, is a
// float sum of values ~1/sqrt(var) larger than every gradient the adapter reports), and the float reference,
// whose formulas cancel symmetrically, can even come out exactly zero there. A wrong translation still moves the
// large tensors by O(1).
inline constexpr double kReferenceFloorFloat = 1e-1;
// In float, a block whose float reference is r away from the double one may differ from the reference by this
// many times r: where a block cancels large terms, two float implementations round differently by up to two
// orders of magnitude more than either's own error suggests (reference_check.h).
inline constexpr double kRoundingFactor = 256;

template <class T>
constexpr double referenceTolerance() {
  return sizeof(T) == 4 ? kReferenceTolFloat : kReferenceTolDouble;
}

}  // namespace ckpt
