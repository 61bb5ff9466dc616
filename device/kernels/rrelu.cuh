// Randomized leaky ReLU in training mode (reference/ops/rrelu.h, PyTorch's _rrelu_with_noise_train): every element
// draws a uniform u_i, whatever its sign, and its slope is lower + (upper - lower) u_i, computed in double and
// rounded to T once; noise_i = slope_i where x_i <= 0, else 1, and y_i = x_i noise_i. The backward is
// dx = dy noise (Multiply in elementwise.cuh).
#pragma once
#include <cstdint>

#include "device/kernels/dropout.cuh"

namespace ckpt::gpu {

// The slope of a uniform, in the reference's double arithmetic. On the device the product and the sum are
// rounded separately (nvcc would otherwise fuse them into one FMA, one rounding fewer than the CPU's), so GPU
// slopes are the CPU's bit for bit, like GPU dropout masks.
CKPT_HD inline double rreluSlope(double lower, double upper, float u) {
#if defined(__CUDA_ARCH__)
  return __dadd_rn(lower, __dmul_rn(upper - lower, static_cast<double>(u)));
#else
  return lower + (upper - lower) * static_cast<double>(u);
#endif
}

// out = inp * noise; noise (optional: no context saved) receives it. Index: Philox block j (philoxBlocksFor).
template <class T>
struct RreluForward {
  T* out;
  T* noise;  // may be null
  const T* inp;
  int64_t n;
  DrawPos draw;
  double lower;
  double upper;
  CKPT_HD void operator()(int64_t j) const {
    T* o = out;
    T* m = noise;
    const T* x = inp;
    const double lo = lower, up = upper;
    forEachDrawOfBlock(draw, n, j, [o, m, x, lo, up](int64_t i, uint32_t bits) {
      const T slope = static_cast<T>(rreluSlope(lo, up, uniformFromBits(bits)));
      const T v = x[i];
      const T k = v <= T(0) ? slope : T(1);
      o[i] = v * k;
      if (m) m[i] = k;
    });
  }
};

}  // namespace ckpt::gpu
