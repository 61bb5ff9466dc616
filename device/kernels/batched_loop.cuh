// The loop of a body that walks a whole row or column in one thread (LayerNorm, softmax, column sums), split into
// its reads and its arithmetic so that on the device a batch of reads is in flight at once. Measured on an H200,
// such bodies written as plain loops waited one load's latency per element (LayerNorm forward: 576 us for 2,048
// rows of 768, 55% of a transformer step with the column sums); a thread per row leaves too few threads to hide
// that latency any other way.
//
// batchedLoop(n, load, use) calls load(i) for kBatch consecutive indices, then use(i, value) for each of them in
// index order. The arithmetic is all in `use`, in the plain loop's order, so results are the plain loop's bit for
// bit on the host and the device. It is the plain loop's meaning only where load(j) reads nothing that use(i) for
// i < j writes: each index reads and writes its own elements, as every body that uses it does.
#pragma once
#include <cstdint>

#include "reference/host_device.h"

#if defined(__CUDA_ARCH__)
#define CKPT_UNROLL _Pragma("unroll")
#else
#define CKPT_UNROLL
#endif

namespace ckpt::gpu {

template <int kBatch = 8, class Load, class Use>
CKPT_HD inline void batchedLoop(int64_t n, const Load& load, const Use& use) {
  using V = decltype(load(int64_t{0}));
  const int64_t batches = n / kBatch;
  for (int64_t q = 0; q < batches; ++q) {
    const int64_t i = q * kBatch;
    V v[kBatch];
    CKPT_UNROLL
    for (int k = 0; k < kBatch; ++k) v[k] = load(i + k);
    CKPT_UNROLL
    for (int k = 0; k < kBatch; ++k) use(i + k, v[k]);
  }
  for (int64_t i = batches * kBatch; i < n; ++i) use(i, load(i));
}

}  // namespace ckpt::gpu
