// LayerNorm bodies (reference/ops/layernorm.h) on x (N, C) row-major. Forward and the input gradient run one
// call per row; the parameter gradients one call per column, summing rows in order exactly as the reference's
// row loop does (bitwise on the host). Row sums are sequential here and Eigen-vectorised in the
// reference, so mean, rstd and the two backward means agree to rounding, not bitwise.
#pragma once
#include <cstdint>

#include "reference/cuda/kernels/hd_math.cuh"

namespace ckpt::gpu {

// y = (x - mean) rstd weight + bias; mean and rstd (N) are written too (context or workspace).
template <class T>
struct LayerNormForward {
  T* out;
  T* mean;
  T* rstd;
  const T* inp;
  const T* weight;
  const T* bias;
  int64_t cols;
  T eps;
  CKPT_HD void operator()(int64_t r) const {
    const T* x = inp + r * cols;
    T* y = out + r * cols;
    const T invC = T(1) / static_cast<T>(cols);
    T sum = 0;
    for (int64_t c = 0; c < cols; ++c) sum += x[c];
    const T m = sum * invC;
    T sq = 0;
    for (int64_t c = 0; c < cols; ++c) {
      const T d = x[c] - m;
      sq += d * d;
    }
    const T var = sq * invC;
    const T s = T(1) / hdSqrt(var + eps);
    for (int64_t c = 0; c < cols; ++c) y[c] = (x[c] - m) * s * weight[c] + bias[c];
    mean[r] = m;
    rstd[r] = s;
  }
};

// dx = rstd (dnorm - mean(dnorm) - xhat mean(dnorm xhat)), dnorm = dy weight. One call per row.
template <class T>
struct LayerNormBackwardInput {
  T* dinp;
  const T* dout;
  const T* inp;
  const T* mean;
  const T* rstd;
  const T* weight;
  int64_t cols;
  CKPT_HD void operator()(int64_t r) const {
    const T* x = inp + r * cols;
    const T* dy = dout + r * cols;
    T* dx = dinp + r * cols;
    const T invC = T(1) / static_cast<T>(cols);
    const T m = mean[r], s = rstd[r];
    T dnormSum = 0, dnormXhatSum = 0;
    for (int64_t c = 0; c < cols; ++c) {
      const T xhat = (x[c] - m) * s;
      const T dnorm = dy[c] * weight[c];
      dnormSum += dnorm;
      dnormXhatSum += dnorm * xhat;
    }
    const T dnormMean = dnormSum * invC;
    const T dnormXhatMean = dnormXhatSum * invC;
    for (int64_t c = 0; c < cols; ++c) {
      const T xhat = (x[c] - m) * s;
      const T dnorm = dy[c] * weight[c];
      dx[c] = (dnorm - dnormMean - xhat * dnormXhatMean) * s;
    }
  }
};

// dweight += sum_r dy xhat, dbias += sum_r dy: each summed over rows in order from zero, then added once, as
// the reference does. One call per column.
template <class T>
struct LayerNormBackwardParams {
  T* dweight;
  T* dbias;
  const T* dout;
  const T* inp;
  const T* mean;
  const T* rstd;
  int64_t rows;
  int64_t cols;
  CKPT_HD void operator()(int64_t c) const {
    T gw = 0, gb = 0;
    for (int64_t r = 0; r < rows; ++r) {
      const T xhat = (inp[r * cols + c] - mean[r]) * rstd[r];
      const T dy = dout[r * cols + c];
      gw += dy * xhat;
      gb += dy;
    }
    dweight[c] += gw;
    dbias[c] += gb;
  }
};

}  // namespace ckpt::gpu
