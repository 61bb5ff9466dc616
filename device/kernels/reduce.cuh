// Column reductions, one call per column, rows summed in order (deterministic; coalesced on the device), the
// reads batched (batched_loop.cuh).
#pragma once
#include <cstdint>

#include "device/kernels/batched_loop.cuh"

namespace ckpt::gpu {

// dst[c] += sum_r src[r, c]: Linear's bias gradient (b.grad += dy.colwise().sum()).
template <class T>
struct ColumnSumAccumulate {
  T* dst;
  const T* src;
  int64_t rows;
  int64_t cols;
  CKPT_HD void operator()(int64_t c) const {
    const T* col = src + c;
    const int64_t stride = cols;
    T sum = 0;
    batchedLoop(rows, [col, stride](int64_t r) { return col[r * stride]; }, [&sum](int64_t, T v) { sum += v; });
    dst[c] += sum;
  }
};

}  // namespace ckpt::gpu
