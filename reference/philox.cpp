// philoxUniforms (declared and described in philox.h), out of line: one compiled copy for every caller.
//
// The blocks of a batch go side by side in vector registers: with AVX-512 sixteen blocks per instruction, with
// AVX2 eight, otherwise kPhiloxBatch blocks in structure-of-arrays form that the compiler vectorises as it can.
// Per draw on one AVX-512 machine: 1.6 ns for the compiler's vectorisation of the portable form, 1.4 ns with
// the AVX2 intrinsics, 0.75 ns with the AVX-512 ones. Philox is integer arithmetic, so every path gives the same
// bits; the conversion to float is uniformFromBits's, a correctly rounded uint32 -> float conversion, a product
// and a sum, each rounded once, on every path. tests/philox_batch_test.cpp holds each path to the per-draw
// definition (the AVX2 and portable paths in builds of their own, tests/CMakeLists.txt).
#include "reference/philox.h"

#if defined(__AVX512F__) || defined(__AVX2__)
#include <immintrin.h>
#endif

namespace ckpt {
namespace {

// Blocks first .. first + kPhiloxBatch - 1 as philoxBits numbers them (block b is draws 4b .. 4b + 3).
void portableBatch(uint64_t firstDraw, uint32_t s0, uint32_t s1, uint32_t k0, uint32_t k1, float* o) {
  uint32_t c0[kPhiloxBatch], c1[kPhiloxBatch], c2[kPhiloxBatch], c3[kPhiloxBatch];
  for (int j = 0; j < kPhiloxBatch; ++j) {
    // As philoxBits computes it, including a counter that wraps past 2^64 within the batch.
    const uint64_t block = (firstDraw + static_cast<uint64_t>(4 * j)) >> 2;
    c0[j] = static_cast<uint32_t>(block);
    c1[j] = static_cast<uint32_t>(block >> 32);
    c2[j] = s0;
    c3[j] = s1;
  }
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
  for (int j = 0; j < kPhiloxBatch; ++j) {
    o[4 * j] = uniformFromBits(c0[j]);
    o[4 * j + 1] = uniformFromBits(c1[j]);
    o[4 * j + 2] = uniformFromBits(c2[j]);
    o[4 * j + 3] = uniformFromBits(c3[j]);
  }
}

constexpr float kInvTwo32 = 2.3283064e-10f;  // uniformFromBits's 2^-32

// Philox's ten rounds (philoxBits') on a register of blocks per word, for an instruction set S: S::V a register
// of 32-bit lanes, S::set1 a broadcast, S::xor3, S::mulHiLo (every lane's 32 x 32 -> 64-bit product with m, as
// high and low words).
template <class S>
void philoxRounds(typename S::V& c0, typename S::V& c1, typename S::V& c2, typename S::V& c3, uint32_t k0,
                  uint32_t k1) {
  const typename S::V m0 = S::set1(kPhiloxM0), m1 = S::set1(kPhiloxM1);
  for (int round = 0; round < 10; ++round) {
    typename S::V hi0, lo0, hi1, lo1;
    S::mulHiLo(c0, m0, hi0, lo0);
    S::mulHiLo(c2, m1, hi1, lo1);
    c0 = S::xor3(hi1, c1, S::set1(k0));
    c2 = S::xor3(hi0, c3, S::set1(k1));
    c1 = lo1;
    c3 = lo0;
    k0 += kPhiloxW0;
    k1 += kPhiloxW1;
  }
}

// The first step of putting a register of each word's draws in counter order: within every 128-bit lane, the
// words of four blocks (f_w holds word w of every block) become u_k = block k's four draws, lane by lane (S::F a
// register of floats; S::unpack32 / S::unpack64 interleave 32- / 64-bit elements, low or high halves).
template <class S>
void transposeInLanes(const typename S::F f[4], typename S::F u[4]) {
  const typename S::F t0 = S::unpack32(f[0], f[1], false), t1 = S::unpack32(f[0], f[1], true);
  const typename S::F t2 = S::unpack32(f[2], f[3], false), t3 = S::unpack32(f[2], f[3], true);
  u[0] = S::unpack64(t0, t2, false);
  u[1] = S::unpack64(t0, t2, true);
  u[2] = S::unpack64(t1, t3, false);
  u[3] = S::unpack64(t1, t3, true);
}

#if defined(__AVX512F__)
constexpr int kLanes = 16;

struct Avx512 {
  using V = __m512i;
  using F = __m512;
  static F unpack32(F a, F b, bool high) { return high ? _mm512_unpackhi_ps(a, b) : _mm512_unpacklo_ps(a, b); }
  static F unpack64(F a, F b, bool high) {
    const __m512d x = _mm512_castps_pd(a), y = _mm512_castps_pd(b);
    return _mm512_castpd_ps(high ? _mm512_unpackhi_pd(x, y) : _mm512_unpacklo_pd(x, y));
  }
  static V set1(uint32_t x) { return _mm512_set1_epi32(static_cast<int>(x)); }
  static V xor3(V a, V b, V c) { return _mm512_xor_si512(_mm512_xor_si512(a, b), c); }
  static void mulHiLo(V a, V m, V& hi, V& lo) {
    const V even = _mm512_mul_epu32(a, m);                        // lanes 0, 2, ...
    const V odd = _mm512_mul_epu32(_mm512_srli_epi64(a, 32), m);  // lanes 1, 3, ...
    lo = _mm512_mask_blend_epi32(0xAAAA, even, _mm512_slli_epi64(odd, 32));
    hi = _mm512_mask_blend_epi32(0xAAAA, _mm512_srli_epi64(even, 32), odd);
  }
};

inline __m512 uniforms(__m512i x) {
  return _mm512_add_ps(_mm512_mul_ps(_mm512_cvtepu32_ps(x), _mm512_set1_ps(kInvTwo32)),
                       _mm512_set1_ps(kInvTwo32 / 2.0f));
}

// Sixteen blocks from block number `block` (no wrap within them), stored as 64 draws in counter order.
void vectorBatch(uint64_t block, uint32_t s0, uint32_t s1, uint32_t k0, uint32_t k1, float* o) {
  const __m512i lo = _mm512_set1_epi32(static_cast<int>(static_cast<uint32_t>(block)));
  __m512i c0 = _mm512_add_epi32(lo, _mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15));
  const __mmask16 carry = _mm512_cmplt_epu32_mask(c0, lo);
  const __m512i hi = _mm512_set1_epi32(static_cast<int>(static_cast<uint32_t>(block >> 32)));
  __m512i c1 = _mm512_mask_add_epi32(hi, carry, hi, _mm512_set1_epi32(1));
  __m512i c2 = Avx512::set1(s0), c3 = Avx512::set1(s1);
  philoxRounds<Avx512>(c0, c1, c2, c3, k0, k1);
  // Lanes to counter order: a 4 x 16 transpose, block j's four draws side by side: in lanes, then across them.
  const __m512 f[4] = {uniforms(c0), uniforms(c1), uniforms(c2), uniforms(c3)};
  __m512 u[4];
  transposeInLanes<Avx512>(f, u);  // u[k] holds blocks k, k + 4, k + 8, k + 12, one per 128-bit lane
  const __m512 w0 = _mm512_shuffle_f32x4(u[0], u[1], 0x44), w1 = _mm512_shuffle_f32x4(u[2], u[3], 0x44);  // 0, 1
  const __m512 w2 = _mm512_shuffle_f32x4(u[0], u[1], 0xEE), w3 = _mm512_shuffle_f32x4(u[2], u[3], 0xEE);  // 2, 3
  _mm512_storeu_ps(o, _mm512_shuffle_f32x4(w0, w1, 0x88));                                                // blocks 0-3
  _mm512_storeu_ps(o + 16, _mm512_shuffle_f32x4(w0, w1, 0xDD));                                           // blocks 4-7
  _mm512_storeu_ps(o + 32, _mm512_shuffle_f32x4(w2, w3, 0x88));                                           // blocks 8-11
  _mm512_storeu_ps(o + 48, _mm512_shuffle_f32x4(w2, w3, 0xDD));  // blocks 12-15
}
#elif defined(__AVX2__)
constexpr int kLanes = 8;

struct Avx2 {
  using V = __m256i;
  using F = __m256;
  static F unpack32(F a, F b, bool high) { return high ? _mm256_unpackhi_ps(a, b) : _mm256_unpacklo_ps(a, b); }
  static F unpack64(F a, F b, bool high) {
    const __m256d x = _mm256_castps_pd(a), y = _mm256_castps_pd(b);
    return _mm256_castpd_ps(high ? _mm256_unpackhi_pd(x, y) : _mm256_unpacklo_pd(x, y));
  }
  static V set1(uint32_t x) { return _mm256_set1_epi32(static_cast<int>(x)); }
  static V xor3(V a, V b, V c) { return _mm256_xor_si256(_mm256_xor_si256(a, b), c); }
  static void mulHiLo(V a, V m, V& hi, V& lo) {
    const V even = _mm256_mul_epu32(a, m);
    const V odd = _mm256_mul_epu32(_mm256_srli_epi64(a, 32), m);
    lo = _mm256_blend_epi32(even, _mm256_slli_epi64(odd, 32), 0xAA);
    hi = _mm256_blend_epi32(_mm256_srli_epi64(even, 32), odd, 0xAA);
  }
};

// uint32 -> float correctly rounded without AVX-512's unsigned conversion: the high and low halves convert
// exactly, the high one's scaling by 2^16 is exact, and the sum rounds once, as the scalar conversion does.
inline __m256 uniforms(__m256i x) {
  const __m256 high = _mm256_mul_ps(_mm256_cvtepi32_ps(_mm256_srli_epi32(x, 16)), _mm256_set1_ps(65536.0f));
  const __m256 low = _mm256_cvtepi32_ps(_mm256_and_si256(x, _mm256_set1_epi32(0xFFFF)));
  return _mm256_add_ps(_mm256_mul_ps(_mm256_add_ps(high, low), _mm256_set1_ps(kInvTwo32)),
                       _mm256_set1_ps(kInvTwo32 / 2.0f));
}

void vectorBatch(uint64_t block, uint32_t s0, uint32_t s1, uint32_t k0, uint32_t k1, float* o) {
  const __m256i lo = _mm256_set1_epi32(static_cast<int>(static_cast<uint32_t>(block)));
  __m256i c0 = _mm256_add_epi32(lo, _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
  // Unsigned c0 < lo, as signed after flipping the sign bits: the lanes that carried.
  const __m256i bias = _mm256_set1_epi32(static_cast<int>(0x80000000u));
  const __m256i carry = _mm256_cmpgt_epi32(_mm256_xor_si256(lo, bias), _mm256_xor_si256(c0, bias));
  __m256i c1 = _mm256_sub_epi32(_mm256_set1_epi32(static_cast<int>(static_cast<uint32_t>(block >> 32))), carry);
  __m256i c2 = Avx2::set1(s0), c3 = Avx2::set1(s1);
  philoxRounds<Avx2>(c0, c1, c2, c3, k0, k1);
  const __m256 f[4] = {uniforms(c0), uniforms(c1), uniforms(c2), uniforms(c3)};
  __m256 u[4];
  transposeInLanes<Avx2>(f, u);                                   // u[k] holds blocks k and k + 4, one per 128-bit lane
  _mm256_storeu_ps(o, _mm256_permute2f128_ps(u[0], u[1], 0x20));  // blocks 0, 1
  _mm256_storeu_ps(o + 8, _mm256_permute2f128_ps(u[2], u[3], 0x20));   // blocks 2, 3
  _mm256_storeu_ps(o + 16, _mm256_permute2f128_ps(u[0], u[1], 0x31));  // blocks 4, 5
  _mm256_storeu_ps(o + 24, _mm256_permute2f128_ps(u[2], u[3], 0x31));  // blocks 6, 7
}
#endif

}  // namespace

void philoxUniforms(uint64_t seed, uint64_t subsequence, uint64_t offset, int64_t n, float* out) {
  int64_t i = 0;
  for (; i < n && ((offset + static_cast<uint64_t>(i)) & 3) != 0; ++i)  // up to the next block boundary
    out[i] = uniformFromBits(philoxBits(seed, subsequence, offset + static_cast<uint64_t>(i)));
  const uint32_t s0 = static_cast<uint32_t>(subsequence), s1 = static_cast<uint32_t>(subsequence >> 32);
  const uint32_t k0 = static_cast<uint32_t>(seed), k1 = static_cast<uint32_t>(seed >> 32);
#if defined(__AVX512F__) || defined(__AVX2__)
  // Block numbers wrap at 2^62 (draw numbers at 2^64); batches that would cross it take the portable path.
  constexpr uint64_t kLastBlock = ~uint64_t{0} >> 2;
  for (; i + 4 * kLanes <= n; i += 4 * kLanes) {
    const uint64_t block = (offset + static_cast<uint64_t>(i)) >> 2;
    if (block > kLastBlock - (kLanes - 1)) break;
    vectorBatch(block, s0, s1, k0, k1, out + i);
  }
#endif
  for (; i + 4 * kPhiloxBatch <= n; i += 4 * kPhiloxBatch)
    portableBatch(offset + static_cast<uint64_t>(i), s0, s1, k0, k1, out + i);
  for (; i < n; ++i) out[i] = uniformFromBits(philoxBits(seed, subsequence, offset + static_cast<uint64_t>(i)));
}

}  // namespace ckpt
