// Philox4x32-10 (Salmon et al., "Parallel random numbers: as easy as 1, 2, 3", SC'11), laid out as cuRAND
// lays it out so that the same (seed, subsequence, offset) gives the same bits on the CPU and as the first draw of
// a device kernel that called curand_init(seed, subsequence, offset, &state); cuRAND's generator API interleaves
// many subsequences, see hostGeneratorIndexToStream.
// Declared __host__ __device__ so the CUDA backend uses this very code. See reference/PHILOX.md.
#pragma once
#include <cstdint>

#include "reference/host_device.h"

namespace ckpt {

struct Philox4 {
  uint32_t v[4];
};

CKPT_HD inline uint32_t mulhilo32(uint32_t a, uint32_t b, uint32_t* hi) {
  uint64_t p = static_cast<uint64_t>(a) * static_cast<uint64_t>(b);
  *hi = static_cast<uint32_t>(p >> 32);
  return static_cast<uint32_t>(p);
}

// The round multipliers and the Weyl key increments.
inline constexpr uint32_t kPhiloxM0 = 0xD2511F53u, kPhiloxM1 = 0xCD9E8D57u;
inline constexpr uint32_t kPhiloxW0 = 0x9E3779B9u, kPhiloxW1 = 0xBB67AE85u;

// One block of four 32-bit outputs for a 128-bit counter and 64-bit key.
CKPT_HD inline Philox4 philox4x32_10(Philox4 ctr, uint32_t k0, uint32_t k1) {
  for (int round = 0; round < 10; ++round) {
    uint32_t hi0, hi1;
    uint32_t lo0 = mulhilo32(kPhiloxM0, ctr.v[0], &hi0);
    uint32_t lo1 = mulhilo32(kPhiloxM1, ctr.v[2], &hi1);
    ctr = Philox4{{hi1 ^ ctr.v[1] ^ k0, lo1, hi0 ^ ctr.v[3] ^ k1, lo0}};
    k0 += kPhiloxW0;
    k1 += kPhiloxW1;
  }
  return ctr;
}

// The 32-bit value curand(&state) returns as its offset-th draw after curand_init(seed, subsequence, 0, &state),
// which is also its first draw after curand_init(seed, subsequence, offset, &state): the 128-bit counter is
// (offset / 4 as 64 bits, subsequence as 64 bits), low word first, the key is the seed (low word first), and
// the draw is lane offset % 4 of that block. Checked against cuRAND in tests/philox_curand_test.cpp.
CKPT_HD inline uint32_t philoxBits(uint64_t seed, uint64_t subsequence, uint64_t offset) {
  const uint64_t block = offset >> 2;
  Philox4 ctr{{static_cast<uint32_t>(block), static_cast<uint32_t>(block >> 32), static_cast<uint32_t>(subsequence),
               static_cast<uint32_t>(subsequence >> 32)}};
  Philox4 out = philox4x32_10(ctr, static_cast<uint32_t>(seed), static_cast<uint32_t>(seed >> 32));
  return out.v[offset & 3];
}

// curand_uniform's mapping of 32 bits to (0, 1]: x * 2^-32 + 2^-33, in float. The product is exact (a power of
// two), so a fused multiply-add on the device rounds exactly like this separate multiply and add.
CKPT_HD inline float uniformFromBits(uint32_t x) {
  constexpr float kInv = 2.3283064e-10f;  // 2^-32 (CURAND_2POW32_INV)
  return static_cast<float>(x) * kInv + kInv / 2.0f;
}

// out[i] = uniformFromBits(philoxBits(seed, subsequence, offset + i)) for 0 <= i < n, bit for bit, on the host.
// Calling philoxBits per draw computes each Philox block four times (once per lane); this computes each block
// once, many blocks side by side in vector registers (AVX-512 or AVX2 intrinsics, else kPhiloxBatch blocks in
// structure-of-arrays form; reference/philox.cpp). Integer arithmetic only until the final uniformFromBits, a
// correctly rounded conversion, a product and a sum, so the bits cannot depend on the vector width.
inline constexpr int kPhiloxBatch = 16;

// Host only, compiled once in reference/philox.cpp.
void philoxUniforms(uint64_t seed, uint64_t subsequence, uint64_t offset, int64_t n, float* out);

// cuRAND's generator API for CURAND_RNG_PSEUDO_PHILOX4_32_10 (curandCreateGenerator[Host] + curandGenerate /
// curandGenerateUniform, orderings PSEUDO_DEFAULT = PSEUDO_BEST = PSEUDO_LEGACY; SEEDED and DYNAMIC are refused
// with CURAND_STATUS_TYPE_ERROR) emulates kCurandPhiloxThreads threads, thread t on subsequence t, each producing
// one whole Philox block (4 draws) per round. Output index i of a curandGenerate* call made when the generator's
// absolute position is generatorOffset (the value given to curandSetGeneratorOffset plus every value generated
// since, in any call of any type) is at position p = generatorOffset + i, taken exactly (65 bits, no wrap):
//   subsequence = (p / 4) mod 65536,   offset = (p / 262144) * 4 + p mod 4.
// Found empirically with the host generator of cuRAND 10.4 (CUDA 13.0); see reference/PHILOX.md.
inline constexpr uint64_t kCurandPhiloxThreads = 65536;

struct PhiloxStreamPos {
  uint64_t subsequence = 0;
  uint64_t offset = 0;
};

CKPT_HD inline PhiloxStreamPos hostGeneratorIndexToStream(uint64_t generatorOffset, uint64_t index) {
  const uint64_t lo = generatorOffset + index;
  const uint64_t carry = lo < generatorOffset ? 1 : 0;  // p = carry * 2^64 + lo
  const uint64_t lap = (lo >> 18) + (carry << 46);      // p / (4 * 65536): how many blocks each thread made before
  return PhiloxStreamPos{(lo >> 2) & (kCurandPhiloxThreads - 1), (lap << 2) | (lo & 3)};
}

// The i-th value of curandGenerate after curandSetPseudoRandomGeneratorSeed(seed) and
// curandSetGeneratorOffset(generatorOffset), in that order (see reference/PHILOX.md for the reseeding caveat).
CKPT_HD inline uint32_t curandGeneratorBits(uint64_t seed, uint64_t generatorOffset, uint64_t index) {
  const PhiloxStreamPos pos = hostGeneratorIndexToStream(generatorOffset, index);
  return philoxBits(seed, pos.subsequence, pos.offset);
}

}  // namespace ckpt
