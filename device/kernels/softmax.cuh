// Causal softmax of attention scores (reference/ops/attention.h), one call per row of the (B*H*T, T) score
// array; row r is query position t = r mod T, which sees keys 0..t. Masked positions are exactly 0, as in the
// reference. exp is std::exp per element here and Eigen's vectorised exp in the reference: rounding-level
// agreement, not bitwise. The walks over a row are batchedLoops (batched_loop.cuh): the plain loops' arithmetic in
// their order, the reads batched.
#pragma once
#include <cstdint>

#include "device/kernels/batched_loop.cuh"
#include "device/kernels/hd_math.cuh"

namespace ckpt::gpu {

// In place on the raw scores q k^T: P = softmax(scores * scale) over keys 0..t, 0 beyond.
template <class T>
struct CausalSoftmaxForward {
  T* att;
  int64_t seq;
  T scale;
  CKPT_HD void operator()(int64_t r) const {
    T* s = att + r * seq;
    const int64_t live = r % seq + 1;
    const T sc = scale;
    const auto loadS = [s](int64_t j) { return s[j]; };
    batchedLoop(live, loadS, [s, sc](int64_t j, T v) { s[j] = v * sc; });
    T mx = s[0];
    batchedLoop(live - 1, [s](int64_t j) { return s[j + 1]; }, [&mx](int64_t, T v) { mx = hdMax(mx, v); });
    T sum = 0;
    batchedLoop(live, loadS, [s, mx, &sum](int64_t j, T v) {
      const T e = hdExp(v - mx);
      s[j] = e;
      sum += e;
    });
    batchedLoop(live, loadS, [s, sum](int64_t j, T v) { s[j] = v / sum; });
    for (int64_t j = live; j < seq; ++j) s[j] = T(0);
  }
};

// dS = P (dP - rowsum(dP P)) scale, written over dP's row in place (dS is 0 wherever P is).
template <class T>
struct SoftmaxBackward {
  T* dscores;    // in: dP (after the dropout mask); out: dS
  const T* att;  // P
  int64_t seq;
  T scale;
  CKPT_HD void operator()(int64_t r) const {
    T* d = dscores + r * seq;
    const T* p = att + r * seq;
    const T sc = scale;
    struct Pair {
      T d, p;
    };
    const auto load = [d, p](int64_t j) { return Pair{d[j], p[j]}; };
    T dot = 0;
    batchedLoop(seq, load, [&dot](int64_t, const Pair& v) { dot += v.d * v.p; });
    batchedLoop(seq, load, [d, dot, sc](int64_t j, const Pair& v) { d[j] = v.p * (v.d - dot) * sc; });
  }
};

}  // namespace ckpt::gpu
