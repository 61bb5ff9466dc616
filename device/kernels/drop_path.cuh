// Drop-path (stochastic depth, reference/ops/drop_path.h): one draw per sample, a sample being `seq` consecutive
// rows. Sample s of a draw (seed, subsequence, offset) is kept iff u_s > p, u_s = uniformFromBits of the stream
// value at offset + s, exactly as dropout.cuh decides an element; its rows are scaled by 1 / (1 - p) or zeroed.
// The scales are made first (one call per Philox block, as DropoutForward) and applied per element after, so
// the forward and the backward multiply by the same saved per-sample scale.
#pragma once
#include <cstdint>

#include "device/kernels/dropout.cuh"

namespace ckpt::gpu {

// scales[s] = keepScale if u_s > p, else 0. Index: Philox block j (philoxBlocksFor(draw.offset, samples)).
template <class T>
struct DropPathScales {
  T* scales;
  int64_t samples;
  DrawPos draw;
  double p;
  T keepScale;
  CKPT_HD void operator()(int64_t j) const {
    T* s = scales;
    const double pp = p;
    const T keep = keepScale;
    forEachDrawOfBlock(draw, samples, j, [s, pp, keep](int64_t i, uint32_t bits) {
      s[i] = static_cast<double>(uniformFromBits(bits)) > pp ? keep : T(0);
    });
  }
};

// out[i] = inp[i] * scales[i / span]: span = seq * width elements make one sample. The forward (inp = x) and
// the backward (inp = dy) alike. Index: element i.
template <class T>
struct ScaleBySample {
  T* out;
  const T* inp;
  const T* scales;
  int64_t span;
  CKPT_HD void operator()(int64_t i) const { out[i] = inp[i] * scales[i / span]; }
};

}  // namespace ckpt::gpu
