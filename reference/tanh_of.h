// The reference's tanh, for the Tanh op, GELU's tanh form and their device kernels.
//
// float: straight-line arithmetic, no call and no branch, so a loop over it vectorises (GCC turns the selects into
// blends at -O3) and costs about a twelfth of glibc's tanhf, which was a third of a transformer step's time.
// Every float's tanh is within 1.14 ulp of the exact value (1.134 at worst, x = 0.8674780, over all 2^31
// non-negative floats), tanh(-x) = -tanh(x), tanh(+-0) = +-0, tanh(NaN) is NaN, tanh(+-inf) = +-1, and it never
// decreases (tests/tanh_of_test.cpp sweeps the floats):
//  - |x| < 0.75: x + x^3 q(x^2), q a degree-5 near-minimax fit of (tanh(x) / x - 1) / x^2;
//  - otherwise 1 - 2 / (e^{2|x|} + 1), e^y = 2^k e^r with k = round(y / ln 2), r = y - k ln 2 in two parts
//    (Cody-Waite) and e^r a degree-7 Taylor polynomial; |x| is clamped at 9.5, where tanh rounds to 1.
// Written with separate multiplies and adds (the build's -ffp-contract=off keeps them so): the vectorised loop, a
// scalar call and a kernel body run through the host launcher round alike, so the CPU op and the device kernel on
// the host emulator agree bit for bit. On the device nvcc contracts into FMAs: GPU results are close, not equal.
// double: std::tanh (::tanh on the device), as before; double cases are small and never the time-critical ones.
#pragma once
#include <cmath>
#include <cstdint>
#include <type_traits>

#include "reference/host_device.h"

namespace ckpt {

CKPT_HD inline float tanhOfFloat(float x) {
  const float a = ::fabsf(x);
  const float z = a * a;
  float q = 0.0017369409324601293f;
  q = q * z + -0.007657264359295368f;
  q = q * z + 0.0214520413428545f;
  q = q * z + -0.05389272794127464f;
  q = q * z + 0.1333269476890564f;
  q = q * z + -0.33333316445350647f;
  const float small = a + (a * z) * q;

  const float y = 2.0f * (a < 9.5f ? a : 9.5f);
  constexpr float kRound = 12582912.0f;  // 1.5 * 2^23: adding and subtracting it rounds to an integer
  const float kf = (y * 1.44269504088896341f + kRound) - kRound;
  const float r = (y - kf * 0.693145751953125f) - kf * 1.428606765330187045e-06f;  // ln 2 = hi + lo, k hi exact
  float p = 1.0f / 5040.0f;
  p = p * r + 1.0f / 720.0f;
  p = p * r + 1.0f / 120.0f;
  p = p * r + 1.0f / 24.0f;
  p = p * r + 1.0f / 6.0f;
  p = p * r + 0.5f;
  p = p * r + 1.0f;
  p = p * r + 1.0f;
  // 2^k from its exponent bits (k is 0..28 here).
  const int32_t twoKBits = (static_cast<int32_t>(kf) + 127) << 23;
#if defined(__CUDA_ARCH__)
  const float twoK = __int_as_float(twoKBits);
#else
  const float twoK = __builtin_bit_cast(float, twoKBits);
#endif
  const float large = 1.0f - 2.0f / (p * twoK + 1.0f);
  // NaN fails the comparison and keeps the small form, which is NaN.
  return ::copysignf(a >= 0.75f ? large : small, x);
}

template <class T>
CKPT_HD inline T tanhOf(T x) {
  if constexpr (std::is_same_v<T, float>) {
    return tanhOfFloat(x);
  } else {
#if defined(__CUDA_ARCH__)
    return ::tanh(x);
#else
    return std::tanh(x);
#endif
  }
}

}  // namespace ckpt
