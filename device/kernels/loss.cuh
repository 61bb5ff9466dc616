// Loss bodies: softmax cross-entropy (reference/ops/cross_entropy.h) and MSE (reference/ops/mse.h). Per-row
// terms are computed one call per row; the mean over rows is a single sequential call (SumRows), so the loss is
// deterministic and its summation order is fixed.
#pragma once
#include <cstdint>

#include "device/kernels/hd_math.cuh"

namespace ckpt::gpu {

// probs = softmax(x_r) and term_r = log(sum) - (x[label] - max): the row's -log softmax at its label. The
// label's logit is read before probs is written, so probs may be the logits' own buffer (the LM head computes its
// logits into the probabilities' buffer, reference/ops/lm_head.h).
template <class T>
struct CrossEntropyForwardRow {
  T* probs;
  T* term;
  const T* inp;
  const int* labels;
  int64_t cols;
  CKPT_HD void operator()(int64_t r) const {
    const T* x = inp + r * cols;
    T* p = probs + r * cols;
    T mx = x[0];
    for (int64_t c = 1; c < cols; ++c) mx = hdMax(mx, x[c]);
    const T atLabel = x[labels[r]];
    T sum = 0;
    for (int64_t c = 0; c < cols; ++c) {
      p[c] = hdExp(x[c] - mx);
      sum += p[c];
    }
    for (int64_t c = 0; c < cols; ++c) p[c] /= sum;
    term[r] = hdLog(sum) - (atLabel - mx);
  }
};

// dx = (P - onehot(label)) / N, elementwise (in place when dinp is probs).
template <class T>
struct CrossEntropyBackward {
  T* dinp;
  const T* probs;
  const int* labels;
  int64_t cols;
  T invN;
  CKPT_HD void operator()(int64_t i) const {
    T v = probs[i];
    if (i % cols == labels[i / cols]) v -= T(1);
    dinp[i] = v * invN;
  }
};

// term_r = sum_c (x - target)^2.
template <class T>
struct MseForwardRow {
  T* term;
  const T* inp;
  const T* target;
  int64_t cols;
  CKPT_HD void operator()(int64_t r) const {
    T sum = 0;
    for (int64_t c = 0; c < cols; ++c) {
      const T d = inp[r * cols + c] - target[r * cols + c];
      sum += d * d;
    }
    term[r] = sum;
  }
};

// dx = (x - target) * (2 / size).
template <class T>
struct MseBackward {
  T* dinp;
  const T* inp;
  const T* target;
  T scale;
  CKPT_HD void operator()(int64_t i) const { dinp[i] = (inp[i] - target[i]) * scale; }
};

// out[0] = (sum of terms in order) / divisor. A single call (index 0).
template <class T>
struct SumRows {
  T* out;
  const T* terms;
  int64_t n;
  T divisor;
  CKPT_HD void operator()(int64_t) const {
    T total = 0;
    for (int64_t r = 0; r < n; ++r) total += terms[r];
    out[0] = total / divisor;
  }
};

}  // namespace ckpt::gpu
