// Causal softmax of attention scores (reference/ops/attention.h), one call per row of the (B*H*T, T) score
// array; row r is query position t = r mod T, which sees keys 0..t. Masked positions are exactly 0, as in the
// reference. exp is std::exp per element here and Eigen's vectorised exp in the reference: rounding-level
// agreement, not bitwise.
#pragma once
#include <cstdint>

#include "reference/cuda/kernels/hd_math.cuh"

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
    for (int64_t j = 0; j < live; ++j) s[j] *= scale;
    T mx = s[0];
    for (int64_t j = 1; j < live; ++j) mx = hdMax(mx, s[j]);
    T sum = 0;
    for (int64_t j = 0; j < live; ++j) {
      s[j] = hdExp(s[j] - mx);
      sum += s[j];
    }
    for (int64_t j = 0; j < live; ++j) s[j] /= sum;
    for (int64_t j = live; j < seq; ++j) s[j] = T(0);
  }
};

// dS = P (dP - rowsum(dP P)) scale, written over dP's row in place (dS is 0 wherever P is).
template <class T>
struct SoftmaxBackward {
  T* dscores;      // in: dP (after the dropout mask); out: dS
  const T* att;    // P
  int64_t seq;
  T scale;
  CKPT_HD void operator()(int64_t r) const {
    T* d = dscores + r * seq;
    const T* p = att + r * seq;
    T dot = 0;
    for (int64_t j = 0; j < seq; ++j) dot += d[j] * p[j];
    for (int64_t j = 0; j < seq; ++j) d[j] = p[j] * (d[j] - dot) * scale;
  }
};

}  // namespace ckpt::gpu
