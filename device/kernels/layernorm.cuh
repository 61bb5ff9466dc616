// LayerNorm bodies (reference/ops/layernorm.h) on x (N, C) row-major.
//
// Forward and the input gradient split each row over kLayerNormLanes lanes (layerNormForward,
// layerNormBackwardInput): lane k sums columns k, k + 32, ... in order, one call per (row, lane), so a warp reads
// 32 consecutive elements of a row; one call per row then adds its lanes' partial sums in lane order; the
// elementwise result is one call per element. A row a thread, as the reference loops, left a transformer step's
// 2,048 rows of 768 on 2,048 threads whose warps each read 32 rows' cache lines: 529 us a LayerNorm forward on an
// H200. Row sums are in this lane order here and Eigen-vectorised in the reference, so mean, rstd and the two
// backward means agree to rounding, not bitwise (they never were: the reference's order is Eigen's).
//
// The parameter gradients are one call per column, summing rows in order exactly as the reference's row loop
// does (bitwise on the host), their reads batched (batched_loop.cuh).
#pragma once
#include <cstdint>

#include "device/kernels/batched_loop.cuh"
#include "device/kernels/hd_math.cuh"

namespace ckpt::gpu {

// The lanes a row is split over; the workspace of a row walk is N x kLayerNormLanes partial sums (two for the
// backward's two sums).
inline constexpr int64_t kLayerNormLanes = 32;

// Lane k of a row: its columns k, k + L, k + 2L, ... (L = kLayerNormLanes), walked in order.
template <class Load, class Use>
CKPT_HD inline void forEachLaneColumn(int64_t cols, int64_t lane, const Load& load, const Use& use) {
  const int64_t count = lane < cols ? (cols - lane + kLayerNormLanes - 1) / kLayerNormLanes : 0;
  batchedLoop(
      count, [&load, lane](int64_t i) { return load(lane + i * kLayerNormLanes); },
      [&use, lane](int64_t i, const auto& v) { use(lane + i * kLayerNormLanes, v); });
}

// A row's kLayerNormLanes lane sums, lanes[0], lanes[stride], ..., added in lane order.
template <class T>
CKPT_HD inline T laneTotal(const T* lanes, int64_t stride = 1) {
  T sum = 0;
  for (int64_t k = 0; k < kLayerNormLanes; ++k) sum += lanes[k * stride];
  return sum;
}

// partial[j] = sum of x over lane j % L of row j / L. One call per (row, lane).
template <class T>
struct LayerNormLaneSum {
  T* partial;
  const T* inp;
  int64_t cols;
  CKPT_HD void operator()(int64_t j) const {
    const T* x = inp + (j / kLayerNormLanes) * cols;
    T sum = 0;
    forEachLaneColumn(cols, j % kLayerNormLanes, [x](int64_t c) { return x[c]; }, [&sum](int64_t, T v) { sum += v; });
    partial[j] = sum;
  }
};

// mean[r] = (sum of row r's lane sums, in lane order) / C. One call per row.
template <class T>
struct LayerNormMean {
  T* mean;
  const T* partial;
  int64_t cols;
  CKPT_HD void operator()(int64_t r) const {
    mean[r] = laneTotal(partial + r * kLayerNormLanes) * (T(1) / static_cast<T>(cols));
  }
};

// partial[j] = sum of (x - mean)^2 over lane j % L of row j / L. One call per (row, lane).
template <class T>
struct LayerNormLaneSquares {
  T* partial;
  const T* inp;
  const T* mean;
  int64_t cols;
  CKPT_HD void operator()(int64_t j) const {
    const int64_t r = j / kLayerNormLanes;
    const T* x = inp + r * cols;
    const T m = mean[r];
    T sq = 0;
    forEachLaneColumn(
        cols, j % kLayerNormLanes, [x](int64_t c) { return x[c]; },
        [&sq, m](int64_t, T v) {
          const T d = v - m;
          sq += d * d;
        });
    partial[j] = sq;
  }
};

// rstd[r] = 1 / sqrt(var + eps), var = (sum of row r's lane sums) / C. One call per row.
template <class T>
struct LayerNormRstd {
  T* rstd;
  const T* partial;
  int64_t cols;
  T eps;
  CKPT_HD void operator()(int64_t r) const {
    const T var = laneTotal(partial + r * kLayerNormLanes) * (T(1) / static_cast<T>(cols));
    rstd[r] = T(1) / hdSqrt(var + eps);
  }
};

// y = (x - mean) rstd weight + bias. One call per element.
template <class T>
struct LayerNormApply {
  T* out;
  const T* inp;
  const T* mean;
  const T* rstd;
  const T* weight;
  const T* bias;
  int64_t cols;
  CKPT_HD void operator()(int64_t e) const {
    const int64_t r = e / cols, c = e % cols;
    out[e] = (inp[e] - mean[r]) * rstd[r] * weight[c] + bias[c];
  }
};

// y = LayerNorm(x); mean and rstd (N) are written too (context or workspace); `partial` is N x kLayerNormLanes
// workspace.
template <class T, class X>
void layerNormForward(X& x, T* y, T* mean, T* rstd, const T* in, const T* weight, const T* bias, int64_t rows,
                      int64_t cols, T eps, T* partial) {
  x.launch(rows * kLayerNormLanes, LayerNormLaneSum<T>{partial, in, cols});
  x.launch(rows, LayerNormMean<T>{mean, partial, cols});
  x.launch(rows * kLayerNormLanes, LayerNormLaneSquares<T>{partial, in, mean, cols});
  x.launch(rows, LayerNormRstd<T>{rstd, partial, cols, eps});
  x.launch(rows * cols, LayerNormApply<T>{y, in, mean, rstd, weight, bias, cols});
}

// The input gradient's two row sums over a lane: partial[2j] = sum dnorm, partial[2j + 1] = sum dnorm xhat,
// dnorm = dy weight, xhat = (x - mean) rstd. One call per (row, lane).
template <class T>
struct LayerNormBackwardLaneSums {
  T* partial;
  const T* dout;
  const T* inp;
  const T* mean;
  const T* rstd;
  const T* weight;
  int64_t cols;
  CKPT_HD void operator()(int64_t j) const {
    const int64_t r = j / kLayerNormLanes;
    const T* x = inp + r * cols;
    const T* dy = dout + r * cols;
    const T* w = weight;
    const T m = mean[r], s = rstd[r];
    struct Col {
      T x, dy, w;
    };
    T dnormSum = 0, dnormXhatSum = 0;
    forEachLaneColumn(
        cols, j % kLayerNormLanes, [x, dy, w](int64_t c) { return Col{x[c], dy[c], w[c]}; },
        [&dnormSum, &dnormXhatSum, m, s](int64_t, const Col& v) {
          const T xhat = (v.x - m) * s;
          const T dnorm = v.dy * v.w;
          dnormSum += dnorm;
          dnormXhatSum += dnorm * xhat;
        });
    partial[2 * j] = dnormSum;
    partial[2 * j + 1] = dnormXhatSum;
  }
};

// Row r's two means, from its lanes' sums in lane order, written over its first two partial slots (only this
// call touches row r's slots). One call per row.
template <class T>
struct LayerNormBackwardMeans {
  T* partial;
  int64_t cols;
  CKPT_HD void operator()(int64_t r) const {
    T* p = partial + 2 * r * kLayerNormLanes;
    const T dnormSum = laneTotal(p, 2), dnormXhatSum = laneTotal(p + 1, 2);
    const T invC = T(1) / static_cast<T>(cols);
    p[0] = dnormSum * invC;
    p[1] = dnormXhatSum * invC;
  }
};

// dx = rstd (dnorm - mean(dnorm) - xhat mean(dnorm xhat)). One call per element; dx may be dy's buffer.
template <class T>
struct LayerNormBackwardApply {
  T* dinp;
  const T* dout;
  const T* inp;
  const T* mean;
  const T* rstd;
  const T* weight;
  const T* partial;
  int64_t cols;
  CKPT_HD void operator()(int64_t e) const {
    const int64_t r = e / cols, c = e % cols;
    const T m = mean[r], s = rstd[r];
    const T dnormMean = partial[2 * r * kLayerNormLanes], dnormXhatMean = partial[2 * r * kLayerNormLanes + 1];
    const T xhat = (inp[e] - m) * s;
    const T dnorm = dout[e] * weight[c];
    dinp[e] = (dnorm - dnormMean - xhat * dnormXhatMean) * s;
  }
};

// dx from dy and the forward's mean and rstd; dx may be dy's buffer. `partial` is N x 2 kLayerNormLanes
// workspace.
template <class T, class X>
void layerNormBackwardInput(X& x, T* dx, const T* dy, const T* in, const T* mean, const T* rstd, const T* weight,
                            int64_t rows, int64_t cols, T* partial) {
  x.launch(rows * kLayerNormLanes, LayerNormBackwardLaneSums<T>{partial, dy, in, mean, rstd, weight, cols});
  x.launch(rows, LayerNormBackwardMeans<T>{partial, cols});
  x.launch(rows * cols, LayerNormBackwardApply<T>{dx, dy, in, mean, rstd, weight, partial, cols});
}

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
