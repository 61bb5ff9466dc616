// BatchNorm1d bodies in training mode (reference/ops/batchnorm.h) on x (N, C) row-major, one call per column:
// batch statistics, normalisation, the running-statistics update (first forward only) and the backward. Column
// sums are sequential over rows here (adjacent threads read adjacent columns, so loads coalesce).
#pragma once
#include <cstdint>

#include "device/kernels/hd_math.cuh"

namespace ckpt::gpu {

template <class T>
struct BatchNormForward {
  T* out;
  T* mean;  // (C): context or workspace
  T* rstd;  // (C)
  T* runningMean;
  T* runningVar;
  T* numBatchesTracked;  // (1)
  const T* inp;
  const T* weight;
  const T* bias;
  int64_t rows;
  int64_t cols;
  T eps;
  T momentum;
  CKPT_HD void operator()(int64_t c) const {
    const T invN = T(1) / static_cast<T>(rows);
    T sum = 0;
    for (int64_t r = 0; r < rows; ++r) sum += inp[r * cols + c];
    const T m = sum * invN;
    T sumSq = 0;
    for (int64_t r = 0; r < rows; ++r) {
      const T d = inp[r * cols + c] - m;
      sumSq += d * d;
    }
    const T s = T(1) / hdSqrt(sumSq * invN + eps);
    const T a = s * weight[c];
    for (int64_t r = 0; r < rows; ++r) out[r * cols + c] = (inp[r * cols + c] - m) * a + bias[c];
    mean[c] = m;
    rstd[c] = s;
    // Every training forward moves the running statistics, as the reference op does; a recompute's update is
    // undone by the block runtime (reference/block_runtime.h, StateGuard).
    const T unbiased = T(1) / static_cast<T>(rows - 1);
    runningMean[c] = (T(1) - momentum) * runningMean[c] + momentum * m;
    runningVar[c] = (T(1) - momentum) * runningVar[c] + momentum * (sumSq * unbiased);
    if (c == 0) numBatchesTracked[0] += T(1);
  }
};

// dx = rstd (dnorm - mean(dnorm) - xhat mean(dnorm xhat)) per column, dnorm = dy weight;
// dweight += sum dy xhat, dbias += sum dy.
template <class T>
struct BatchNormBackward {
  T* dinp;
  T* dweight;
  T* dbias;
  const T* dout;
  const T* inp;
  const T* mean;
  const T* rstd;
  const T* weight;
  int64_t rows;
  int64_t cols;
  CKPT_HD void operator()(int64_t c) const {
    const T invN = T(1) / static_cast<T>(rows);
    const T m = mean[c], s = rstd[c], w = weight[c];
    T dnormSum = 0, dnormXhatSum = 0, dyXhatSum = 0, dySum = 0;
    for (int64_t r = 0; r < rows; ++r) {
      const T xhat = (inp[r * cols + c] - m) * s;
      const T dy = dout[r * cols + c];
      const T dnorm = dy * w;
      dnormSum += dnorm;
      dnormXhatSum += dnorm * xhat;
      dyXhatSum += dy * xhat;
      dySum += dy;
    }
    const T dnormMean = dnormSum * invN;
    const T dnormXhatMean = dnormXhatSum * invN;
    for (int64_t r = 0; r < rows; ++r) {
      const T xhat = (inp[r * cols + c] - m) * s;
      const T dnorm = dout[r * cols + c] * w;
      dinp[r * cols + c] = (dnorm - dnormMean - xhat * dnormXhatMean) * s;
    }
    dweight[c] += dyXhatSum;
    dbias[c] += dySum;
  }
};

}  // namespace ckpt::gpu
