// Column reductions, one call per column, rows summed in order (deterministic; coalesced on the device).
#pragma once
#include <cstdint>

#include "reference/philox.h"

namespace ckpt::gpu {

// dst[c] += sum_r src[r, c]: Linear's bias gradient (b.grad += dy.colwise().sum()).
template <class T>
struct ColumnSumAccumulate {
  T* dst;
  const T* src;
  int64_t rows;
  int64_t cols;
  CKPT_HD void operator()(int64_t c) const {
    T sum = 0;
    for (int64_t r = 0; r < rows; ++r) sum += src[r * cols + c];
    dst[c] += sum;
  }
};

}  // namespace ckpt::gpu
