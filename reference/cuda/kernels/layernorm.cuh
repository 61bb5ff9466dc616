// LayerNorm bodies (reference/ops/layernorm.h) on x (N, C) row-major. Forward and the input gradient run one
// call per row; the parameter gradients one call per column, summing rows in order exactly as the reference's
// row loop does (bitwise on the host). Row sums are sequential here and Eigen-vectorised in the
// reference, so mean, rstd and the two backward means agree to rounding, not bitwise. Every walk is a batchedLoop
// (batched_loop.cuh): the same arithmetic in the same order, its reads batched.
#pragma once
#include <cstdint>

#include "reference/cuda/kernels/batched_loop.cuh"
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
    const T* w = weight;
    const T* b = bias;
    const T invC = T(1) / static_cast<T>(cols);
    const auto loadX = [x](int64_t c) { return x[c]; };
    T sum = 0;
    batchedLoop(cols, loadX, [&sum](int64_t, T xc) { sum += xc; });
    const T m = sum * invC;
    T sq = 0;
    batchedLoop(cols, loadX, [&sq, m](int64_t, T xc) {
      const T d = xc - m;
      sq += d * d;
    });
    const T var = sq * invC;
    const T s = T(1) / hdSqrt(var + eps);
    struct Col {
      T x, w, b;
    };
    batchedLoop(
        cols, [x, w, b](int64_t c) { return Col{x[c], w[c], b[c]}; },
        [y, m, s](int64_t c, const Col& v) { y[c] = (v.x - m) * s * v.w + v.b; });
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
    const T* w = weight;
    T* dx = dinp + r * cols;
    const T invC = T(1) / static_cast<T>(cols);
    const T m = mean[r], s = rstd[r];
    struct Col {
      T x, dy, w;
    };
    const auto load = [x, dy, w](int64_t c) { return Col{x[c], dy[c], w[c]}; };
    T dnormSum = 0, dnormXhatSum = 0;
    batchedLoop(cols, load, [&dnormSum, &dnormXhatSum, m, s](int64_t, const Col& v) {
      const T xhat = (v.x - m) * s;
      const T dnorm = v.dy * v.w;
      dnormSum += dnorm;
      dnormXhatSum += dnorm * xhat;
    });
    const T dnormMean = dnormSum * invC;
    const T dnormXhatMean = dnormXhatSum * invC;
    batchedLoop(cols, load, [dx, m, s, dnormMean, dnormXhatMean](int64_t c, const Col& v) {
      const T xhat = (v.x - m) * s;
      const T dnorm = v.dy * v.w;
      dx[c] = (dnorm - dnormMean - xhat * dnormXhatMean) * s;
    });
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
    const T* x = inp;
    const T* dy = dout;
    const T* mu = mean;
    const T* rs = rstd;
    const int64_t stride = cols;
    struct Row {
      T x, m, s, dy;
    };
    T gw = 0, gb = 0;
    batchedLoop(
        rows,
        [x, dy, mu, rs, stride, c](int64_t r) { return Row{x[r * stride + c], mu[r], rs[r], dy[r * stride + c]}; },
        [&gw, &gb](int64_t, const Row& v) {
          const T xhat = (v.x - v.m) * v.s;
          gw += v.dy * xhat;
          gb += v.dy;
        });
    dweight[c] += gw;
    dbias[c] += gb;
  }
};

}  // namespace ckpt::gpu
