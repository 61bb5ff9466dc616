// Inverted dropout (reference/ops/dropout.h and the attention-probability dropout of reference/ops/attention.h):
// element i of a draw (seed, subsequence, offset) is kept iff u_i > p with u_i = uniformFromBits of the Philox
// stream value at offset + i, and scaled by 1 / (1 - p).
//
// One body call per Philox block of 4 draws, so every counter is computed once: call j covers stream offsets
// 4 (offset / 4 + j) .. + 3, of which those inside [offset, offset + n) are elements. On the device the block
// comes from cuRAND's device API, curand_init(seed, subsequence, 4 * block) + curand4, i.e. exactly what
// reference/philox.h's philoxBits documents and tests/philox_curand_test.cpp checks; on the host from
// philox4x32_10 itself. tests/cuda_gpu_test.cpp checks device masks against CPU masks bit for bit.
#pragma once
#include <cstdint>

#include "device/kernels/hd_math.cuh"
#include "reference/philox.h"

#if defined(__CUDACC__)
#include <curand_kernel.h>
#endif

namespace ckpt::gpu {

// The four draws at stream offsets 4 block .. 4 block + 3 of (seed, subsequence).
CKPT_HD inline Philox4 philoxBlock(uint64_t seed, uint64_t subsequence, uint64_t block) {
#if defined(__CUDA_ARCH__)
  curandStatePhilox4_32_10_t state;
  curand_init(seed, subsequence, block * 4, &state);
  const uint4 r = curand4(&state);
  return Philox4{{r.x, r.y, r.z, r.w}};
#else
  const Philox4 ctr{{static_cast<uint32_t>(block), static_cast<uint32_t>(block >> 32),
                     static_cast<uint32_t>(subsequence), static_cast<uint32_t>(subsequence >> 32)}};
  return philox4x32_10(ctr, static_cast<uint32_t>(seed), static_cast<uint32_t>(seed >> 32));
#endif
}

// The stream position of a draw (reference/rng.h's RngDraw, without its host-only methods).
struct DrawPos {
  uint64_t seed = 0;
  uint64_t subsequence = 0;
  uint64_t offset = 0;
};

// Number of body calls (Philox blocks) that cover n draws starting at `offset`.
CKPT_HD inline int64_t philoxBlocksFor(uint64_t offset, int64_t n) {
  return n <= 0 ? 0 : static_cast<int64_t>(((offset & 3) + static_cast<uint64_t>(n) + 3) >> 2);
}

// Body call j of a draw over n elements (philoxBlocksFor): calls f(i, bits) for each element i of Philox block
// offset / 4 + j that lies inside [offset, offset + n), with that element's 32 random bits. The bodies of the
// other random ops (drop_path.cuh, rrelu.cuh) walk their draws through it.
template <class F>
CKPT_HD inline void forEachDrawOfBlock(const DrawPos& draw, int64_t n, int64_t j, const F& f) {
  const uint64_t block = (draw.offset >> 2) + static_cast<uint64_t>(j);
  const Philox4 r = philoxBlock(draw.seed, draw.subsequence, block);
  for (int lane = 0; lane < 4; ++lane) {
    const uint64_t pos = block * 4 + static_cast<uint64_t>(lane);
    if (pos < draw.offset) continue;
    const int64_t i = static_cast<int64_t>(pos - draw.offset);
    if (i >= n) break;
    f(i, r.v[lane]);
  }
}

// out = inp * m, m = scale or 0; mask (optional) receives m. Index: Philox block j (philoxBlocksFor).
template <class T>
struct DropoutForward {
  T* out;
  T* mask;  // may be null (no context saved)
  const T* inp;
  int64_t n;
  DrawPos draw;
  double p;
  T scale;
  CKPT_HD void operator()(int64_t j) const {
    T* o = out;
    T* mk = mask;
    const T* x = inp;
    const double pp = p;
    const T sc = scale;
    forEachDrawOfBlock(draw, n, j, [o, mk, x, pp, sc](int64_t i, uint32_t bits) {
      const T m = static_cast<double>(uniformFromBits(bits)) > pp ? sc : T(0);
      o[i] = x[i] * m;
      if (mk) mk[i] = m;
    });
  }
};

// The raw 32-bit draws of a stream, for the device-mapping checks. Index: Philox block j.
struct PhiloxDraws {
  uint32_t* out;
  int64_t n;
  DrawPos draw;
  CKPT_HD void operator()(int64_t j) const {
    uint32_t* o = out;
    forEachDrawOfBlock(draw, n, j, [o](int64_t i, uint32_t bits) { o[i] = bits; });
  }
};

}  // namespace ckpt::gpu
