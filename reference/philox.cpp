// philoxUniforms (declared and described in philox.h), out of line: one compiled copy for every caller.
#include "reference/philox.h"

namespace ckpt {

void philoxUniforms(uint64_t seed, uint64_t subsequence, uint64_t offset, int64_t n, float* out) {
  int64_t i = 0;
  for (; i < n && ((offset + static_cast<uint64_t>(i)) & 3) != 0; ++i)  // up to the next block boundary
    out[i] = uniformFromBits(philoxBits(seed, subsequence, offset + static_cast<uint64_t>(i)));
  const uint32_t s0 = static_cast<uint32_t>(subsequence), s1 = static_cast<uint32_t>(subsequence >> 32);
  for (; i + 4 * kPhiloxBatch <= n; i += 4 * kPhiloxBatch) {
    uint32_t c0[kPhiloxBatch], c1[kPhiloxBatch], c2[kPhiloxBatch], c3[kPhiloxBatch];
    for (int j = 0; j < kPhiloxBatch; ++j) {
      // As philoxBits computes it, including a counter that wraps past 2^64 within the batch.
      const uint64_t block = (offset + static_cast<uint64_t>(i + 4 * j)) >> 2;
      c0[j] = static_cast<uint32_t>(block);
      c1[j] = static_cast<uint32_t>(block >> 32);
      c2[j] = s0;
      c3[j] = s1;
    }
    uint32_t k0 = static_cast<uint32_t>(seed), k1 = static_cast<uint32_t>(seed >> 32);
    for (int round = 0; round < 10; ++round) {
      for (int j = 0; j < kPhiloxBatch; ++j) {
        const uint64_t p0 = static_cast<uint64_t>(kPhiloxM0) * c0[j];
        const uint64_t p1 = static_cast<uint64_t>(kPhiloxM1) * c2[j];
        const uint32_t n0 = static_cast<uint32_t>(p1 >> 32) ^ c1[j] ^ k0;
        const uint32_t n2 = static_cast<uint32_t>(p0 >> 32) ^ c3[j] ^ k1;
        c1[j] = static_cast<uint32_t>(p1);
        c3[j] = static_cast<uint32_t>(p0);
        c0[j] = n0;
        c2[j] = n2;
      }
      k0 += kPhiloxW0;
      k1 += kPhiloxW1;
    }
    float* o = out + i;
    for (int j = 0; j < kPhiloxBatch; ++j) {
      o[4 * j] = uniformFromBits(c0[j]);
      o[4 * j + 1] = uniformFromBits(c1[j]);
      o[4 * j + 2] = uniformFromBits(c2[j]);
      o[4 * j + 3] = uniformFromBits(c3[j]);
    }
  }
  for (; i < n; ++i) out[i] = uniformFromBits(philoxBits(seed, subsequence, offset + static_cast<uint64_t>(i)));
}

}  // namespace ckpt
