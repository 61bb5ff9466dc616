// The token stem of a language-model case (reference/ops/token_stem.h): x_0[r] = E[id_r] + P[(firstRow + r) mod
// seq]. Forward is one call per element (one addition, as the reference's row sum). Backward is one call per
// column that walks the rows in order, first into dE then into dP: a column is owned by one call, so a token
// that occurs twice adds its rows in row order with no atomics, and each element sees the reference's additions
// in the reference's order (bitwise on the host).
#pragma once
#include <cstdint>

#include "reference/philox.h"

namespace ckpt::gpu {

template <class T>
struct TokenStemForward {
  T* out;            // (rows, cols)
  const T* emb;      // (vocab, cols)
  const T* pos;      // (seq, cols)
  const int* ids;    // the rows' token ids
  int64_t firstRow;  // the first row's index in the batch (its position is (firstRow + r) mod seq)
  int64_t seq;
  int64_t cols;
  CKPT_HD void operator()(int64_t i) const {
    const int64_t r = i / cols, c = i % cols;
    out[i] = emb[ids[r] * cols + c] + pos[((firstRow + r) % seq) * cols + c];
  }
};

template <class T>
struct TokenStemBackward {
  T* demb;
  T* dpos;
  const T* dout;  // dL/dx_0 (rows, cols)
  const int* ids;
  int64_t firstRow;
  int64_t seq;
  int64_t rows;
  int64_t cols;
  CKPT_HD void operator()(int64_t c) const {
    for (int64_t r = 0; r < rows; ++r) demb[ids[r] * cols + c] += dout[r * cols + c];
    for (int64_t r = 0; r < rows; ++r) dpos[((firstRow + r) % seq) * cols + c] += dout[r * cols + c];
  }
};

}  // namespace ckpt::gpu
