// Scalar math for kernel bodies that compile with both g++ and nvcc (CKPT_HD from reference/host_device.h).
// On the host each function is the very function the CPU reference ops call (std::exp, std::log, std::erf,
// std::sqrt; tanh is reference/tanh_of.h's), so a body run through the host launcher reproduces the reference's
// elementwise arithmetic bit for bit. On the device exp, log and erf are CUDA's libdevice functions of the same
// name and tanh is the reference's own, FMA-contracted by nvcc: GPU results are deterministic run to run but not
// bitwise equal to the CPU's, which is why the GPU property compares GPU with GPU.
#pragma once
#include <cmath>
#include <cstdint>
#include <type_traits>

#include "reference/philox.h"
#include "reference/tanh_of.h"

namespace ckpt::gpu {

template <class T>
CKPT_HD inline T hdExp(T x) {
#if defined(__CUDA_ARCH__)
  if constexpr (std::is_same_v<T, float>) return ::expf(x);
  else return ::exp(x);
#else
  return std::exp(x);
#endif
}

template <class T>
CKPT_HD inline T hdLog(T x) {
#if defined(__CUDA_ARCH__)
  if constexpr (std::is_same_v<T, float>) return ::logf(x);
  else return ::log(x);
#else
  return std::log(x);
#endif
}

// The reference's own tanh on both sides (reference/tanh_of.h).
template <class T>
CKPT_HD inline T hdTanh(T x) {
  return tanhOf(x);
}

template <class T>
CKPT_HD inline T hdErf(T x) {
#if defined(__CUDA_ARCH__)
  if constexpr (std::is_same_v<T, float>) return ::erff(x);
  else return ::erf(x);
#else
  return std::erf(x);
#endif
}

// IEEE square root (correctly rounded on both sides: nvcc's default -prec-sqrt=true).
template <class T>
CKPT_HD inline T hdSqrt(T x) {
#if defined(__CUDA_ARCH__)
  if constexpr (std::is_same_v<T, float>) return ::sqrtf(x);
  else return ::sqrt(x);
#else
  return std::sqrt(x);
#endif
}

// std::max(a, b) semantics ((a < b) ? b : a), which is also Eigen's maxCoeff / cwiseMax order for finite values.
template <class T>
CKPT_HD inline T hdMax(T a, T b) {
  return (a < b) ? b : a;
}

// reference/op.h's roundToBf16, usable on the device.
template <class T>
CKPT_HD inline T hdRoundToBf16(T v) {
  float f = static_cast<float>(v);
#if defined(__CUDA_ARCH__)
  uint32_t u = __float_as_uint(f);
#else
  uint32_t u;
  static_assert(sizeof(u) == sizeof(f));
  __builtin_memcpy(&u, &f, 4);
#endif
  if ((u & 0x7f800000u) != 0x7f800000u) u += 0x7fffu + ((u >> 16) & 1u);
  u &= 0xffff0000u;
#if defined(__CUDA_ARCH__)
  f = __uint_as_float(u);
#else
  __builtin_memcpy(&f, &u, 4);
#endif
  return static_cast<T>(f);
}

}  // namespace ckpt::gpu
