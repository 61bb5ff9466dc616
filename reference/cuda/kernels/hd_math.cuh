// Scalar math for kernel bodies that compile with both g++ and nvcc (CKPT_HD from reference/philox.h).
// On the host each function is the very std:: function the CPU reference ops call, so a body run through the
// host launcher reproduces the reference's elementwise arithmetic bit for bit. On the device it is CUDA's
// correctly-rounded-or-close libdevice function of the same name: GPU results are deterministic run to run but
// not bitwise equal to glibc's (exp, tanh, erf differ in the last bits), which is why the GPU property compares
// GPU with GPU.
#pragma once
#include <cmath>
#include <cstdint>
#include <type_traits>

#include "reference/philox.h"

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

template <class T>
CKPT_HD inline T hdTanh(T x) {
#if defined(__CUDA_ARCH__)
  if constexpr (std::is_same_v<T, float>) return ::tanhf(x);
  else return ::tanh(x);
#else
  return std::tanh(x);
#endif
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
