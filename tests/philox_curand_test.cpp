// reference/philox.h against cuRAND, bit for bit (see reference/PHILOX.md):
//  - philox4x32_10 against the Random123 known-answer vectors, independently of cuRAND;
//  - philoxBits / uniformFromBits against cuRAND's device API (curand_init + curand / curand_uniform / skipahead)
//    compiled for the host from <curand_kernel.h>;
//  - curandGeneratorBits (philoxBits through hostGeneratorIndexToStream) against cuRAND's host generator
//    (curandCreateGeneratorHost, CURAND_RNG_PSEUDO_PHILOX4_32_10), raw 32-bit and uniform floats.
// Tests that need the host generator fail when it cannot be created, unless CKPT_ALLOW_NO_CURAND=1 is set, in which
// case they are skipped.
#include <gtest/gtest.h>
#include <rapidcheck.h>

#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "reference/philox.h"

#if __has_include(<curand_kernel.h>)
// cuRAND's device API is header-only; with QUALIFIERS defined as plain host functions it compiles with a host
// compiler and runs the very code a kernel runs (mulhilo32 takes its host branch, the same arithmetic as __umulhi).
#define QUALIFIERS static inline
#include <curand_kernel.h>
#define CKPT_HAVE_CURAND_KERNEL 1
#endif
#include <curand.h>

namespace ckpt {
namespace {

// ---------------------------------------------------------------------------------------------------------------
// Known answers (Random123 kat_vectors, philox4x32 10 rounds).

TEST(PhiloxKnownAnswer, Random123Vectors) {
  struct Kat {
    Philox4 ctr;
    uint32_t k0, k1;
    Philox4 expected;
  };
  const Kat kats[] = {
      {{{0, 0, 0, 0}}, 0, 0, {{0x6627e8d5u, 0xe169c58du, 0xbc57ac4cu, 0x9b00dbd8u}}},
      {{{0xffffffffu, 0xffffffffu, 0xffffffffu, 0xffffffffu}},
       0xffffffffu,
       0xffffffffu,
       {{0x408f276du, 0x41c83b0eu, 0xa20bc7c6u, 0x6d5451fdu}}},
      {{{0x243f6a88u, 0x85a308d3u, 0x13198a2eu, 0x03707344u}},
       0xa4093822u,
       0x299f31d0u,
       {{0xd16cfe09u, 0x94fdccebu, 0x5001e420u, 0x24126ea1u}}},
  };
  for (const Kat& k : kats) {
    const Philox4 out = philox4x32_10(k.ctr, k.k0, k.k1);
    for (int lane = 0; lane < 4; ++lane) {
      EXPECT_EQ(out.v[lane], k.expected.v[lane]) << "ctr.v[0]=" << std::hex << k.ctr.v[0] << " lane " << lane;
    }
  }
  // philoxBits lays the counter out as (offset / 4, subsequence) and the key as the seed, low words first.
  for (int lane = 0; lane < 4; ++lane) EXPECT_EQ(philoxBits(0, 0, lane), kats[0].expected.v[lane]);
  const uint64_t seed = 0x299f31d0a4093822ull, subsequence = 0x0370734413198a2eull;
  const uint64_t block = 0x05a308d3243f6a88ull;  // < 2^62 so that block * 4 fits the 64-bit offset
  const Philox4 ref =
      philox4x32_10(Philox4{{0x243f6a88u, 0x05a308d3u, 0x13198a2eu, 0x03707344u}}, 0xa4093822u, 0x299f31d0u);
  for (int lane = 0; lane < 4; ++lane) EXPECT_EQ(philoxBits(seed, subsequence, block * 4 + lane), ref.v[lane]);
}

TEST(PhiloxKnownAnswer, UniformEndpoints) {
  auto bits = [](float f) {
    uint32_t u;
    std::memcpy(&u, &f, sizeof u);
    return u;
  };
  const float lo = 0x1p-33f, hi = 1.0f;
  EXPECT_EQ(bits(uniformFromBits(0)), bits(lo));
  EXPECT_EQ(bits(uniformFromBits(0xffffffffu)), bits(hi));
  EXPECT_EQ(bits(uniformFromBits(1u << 31)), bits(0.5f));
}

// ---------------------------------------------------------------------------------------------------------------
// cuRAND's device API, compiled for the host.

#ifdef CKPT_HAVE_CURAND_KERNEL
TEST(PhiloxDeviceApi, CurandInitMatchesPhiloxBits) {
  const uint64_t seeds[] = {0, 1, 0xffffffffull, (1ull << 63) + 5, 0xdeadbeefcafef00dull};
  const uint64_t subsequences[] = {0, 1, 65535, (1ull << 40) + 3, ~0ull};
  const uint64_t offsets[] = {0, 1, 3, 4, 5, (1ull << 33) + 7, (1ull << 62) - 1, ~0ull - 40};
  constexpr int kDraws = 41;
  for (uint64_t seed : seeds) {
    for (uint64_t sub : subsequences) {
      for (uint64_t off : offsets) {
        SCOPED_TRACE(::testing::Message() << "seed " << seed << " subsequence " << sub << " offset " << off);
        curandStatePhilox4_32_10_t a, b, c;
        curand_init(seed, sub, off, &a);  // draws off, off + 1, ...
        curand_init(seed, sub, 0, &b);
        skipahead(off, &b);
        curand_init(seed, sub, off, &c);
        for (int k = 0; k < kDraws; ++k) {
          const uint32_t want = philoxBits(seed, sub, off + k);
          ASSERT_EQ(curand(&a), want) << "draw " << k;
          ASSERT_EQ(curand(&b), want) << "draw " << k << " after skipahead";
          const float u = curand_uniform(&c), e = uniformFromBits(want);
          ASSERT_EQ(std::memcmp(&u, &e, sizeof u), 0) << "uniform draw " << k << ": " << u << " vs " << e;
        }
        // The kernel contract: thread i calls curand_init(seed, subsequence, offset + i) and draws once.
        for (int i = 0; i < 9; ++i) {
          curandStatePhilox4_32_10_t t;
          curand_init(seed, sub, off + i, &t);
          const float u = curand_uniform(&t), e = uniformFromBits(philoxBits(seed, sub, off + i));
          ASSERT_EQ(std::memcmp(&u, &e, sizeof u), 0) << "thread " << i;
        }
        // curand4 hands out the same stream four at a time.
        curandStatePhilox4_32_10_t q;
        curand_init(seed, sub, off, &q);
        for (int k = 0; k < 3; ++k) {
          const uint4 r = curand4(&q);
          const uint32_t got[4] = {r.x, r.y, r.z, r.w};
          for (int lane = 0; lane < 4; ++lane) ASSERT_EQ(got[lane], philoxBits(seed, sub, off + 4 * k + lane));
        }
      }
    }
  }
}
#endif

// ---------------------------------------------------------------------------------------------------------------
// cuRAND's host generator.

bool allowNoCurand() {
  const char* v = std::getenv("CKPT_ALLOW_NO_CURAND");
  return v != nullptr && std::string(v) == "1";
}

class HostGenerator {
 public:
  HostGenerator() { status_ = curandCreateGeneratorHost(&gen_, CURAND_RNG_PSEUDO_PHILOX4_32_10); }
  ~HostGenerator() {
    if (ok()) curandDestroyGenerator(gen_);
  }
  HostGenerator(const HostGenerator&) = delete;
  HostGenerator& operator=(const HostGenerator&) = delete;
  bool ok() const { return status_ == CURAND_STATUS_SUCCESS; }
  curandStatus_t status() const { return status_; }
  curandGenerator_t get() const { return gen_; }

 private:
  curandGenerator_t gen_{};
  curandStatus_t status_ = CURAND_STATUS_NOT_INITIALIZED;
};

std::string noGeneratorMessage(curandStatus_t s) {
  std::ostringstream os;
  os << "curandCreateGeneratorHost(CURAND_RNG_PSEUDO_PHILOX4_32_10) failed with curandStatus_t " << static_cast<int>(s)
     << "; cuRAND's host generator is needed to check reference/philox.h against cuRAND (set CKPT_ALLOW_NO_CURAND=1 "
        "to skip these tests instead)";
  return os.str();
}

// Declares HostGenerator `name`; fails the test (or skips it under CKPT_ALLOW_NO_CURAND=1) when it cannot be made.
#define CKPT_HOST_GENERATOR(name)                                                                         \
  HostGenerator name;                                                                                     \
  if (!name.ok()) {                                                                                       \
    if (allowNoCurand()) GTEST_SKIP() << "CKPT_ALLOW_NO_CURAND=1: " << noGeneratorMessage(name.status()); \
    FAIL() << noGeneratorMessage(name.status());                                                          \
  }

#define CKPT_CURAND_OK(expr) ASSERT_EQ(static_cast<int>(expr), static_cast<int>(CURAND_STATUS_SUCCESS)) << #expr

// Positions the generator: seed first, then the absolute offset (the order that is exact, see PHILOX.md).
::testing::AssertionResult position(const HostGenerator& g, uint64_t seed, uint64_t offset,
                                    curandOrdering ordering = CURAND_ORDERING_PSEUDO_DEFAULT) {
  curandStatus_t s = curandSetPseudoRandomGeneratorSeed(g.get(), seed);
  if (s == CURAND_STATUS_SUCCESS) s = curandSetGeneratorOrdering(g.get(), ordering);
  if (s == CURAND_STATUS_SUCCESS) s = curandSetGeneratorOffset(g.get(), offset);
  if (s != CURAND_STATUS_SUCCESS) return ::testing::AssertionFailure() << "positioning failed: " << static_cast<int>(s);
  return ::testing::AssertionSuccess();
}

// Generates n raw values and compares them with curandGeneratorBits(seed, base, first + i): the generator was
// positioned at offset base and has produced `first` values since (the position base + first is 65 bits wide).
::testing::AssertionResult rawMatches(const HostGenerator& g, uint64_t seed, uint64_t base, uint64_t first, size_t n) {
  std::vector<uint32_t> v(n);
  const curandStatus_t s = curandGenerate(g.get(), v.data(), n);
  if (s != CURAND_STATUS_SUCCESS) return ::testing::AssertionFailure() << "curandGenerate: " << static_cast<int>(s);
  size_t bad = 0, at = 0;
  for (size_t i = 0; i < n; ++i) {
    if (v[i] != curandGeneratorBits(seed, base, first + i) && bad++ == 0) at = i;
  }
  if (bad == 0) return ::testing::AssertionSuccess();
  const PhiloxStreamPos p = hostGeneratorIndexToStream(base, first + at);
  return ::testing::AssertionFailure() << "curandGenerate seed " << seed << " offset " << base << " + " << first
                                       << ", n " << n << ": " << bad << " mismatches, first at index " << at
                                       << " (subsequence " << p.subsequence << ", offset " << p.offset << "): got "
                                       << v[at] << ", want " << curandGeneratorBits(seed, base, first + at);
}

// Generates n uniform floats and compares their bits with uniformFromBits(curandGeneratorBits(seed, base, first + i)).
::testing::AssertionResult uniformMatches(const HostGenerator& g, uint64_t seed, uint64_t base, uint64_t first,
                                          size_t n) {
  std::vector<float> v(n);
  const curandStatus_t s = curandGenerateUniform(g.get(), v.data(), n);
  if (s != CURAND_STATUS_SUCCESS)
    return ::testing::AssertionFailure() << "curandGenerateUniform: " << static_cast<int>(s);
  size_t bad = 0, at = 0;
  for (size_t i = 0; i < n; ++i) {
    const float e = uniformFromBits(curandGeneratorBits(seed, base, first + i));
    if (std::memcmp(&e, &v[i], sizeof e) != 0 && bad++ == 0) at = i;
  }
  if (bad == 0) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << "curandGenerateUniform seed " << seed << " offset " << base << " + " << first
                                       << ", n " << n << ": " << bad << " mismatches, first at index " << at << ": got "
                                       << v[at] << ", want "
                                       << uniformFromBits(curandGeneratorBits(seed, base, first + at));
}

TEST(PhiloxHostGenerator, MappingFormula) {
  // Thread t of 65536 is subsequence t and emits one block of 4 per round.
  EXPECT_EQ(hostGeneratorIndexToStream(0, 0).subsequence, 0u);
  EXPECT_EQ(hostGeneratorIndexToStream(0, 3).offset, 3u);
  EXPECT_EQ(hostGeneratorIndexToStream(0, 4).subsequence, 1u);
  EXPECT_EQ(hostGeneratorIndexToStream(0, 4).offset, 0u);
  EXPECT_EQ(hostGeneratorIndexToStream(0, 262143).subsequence, 65535u);
  EXPECT_EQ(hostGeneratorIndexToStream(0, 262143).offset, 3u);
  EXPECT_EQ(hostGeneratorIndexToStream(0, 262144).subsequence, 0u);
  EXPECT_EQ(hostGeneratorIndexToStream(0, 262144).offset, 4u);
  EXPECT_EQ(hostGeneratorIndexToStream(262140, 9).subsequence, 1u);
  EXPECT_EQ(hostGeneratorIndexToStream(262140, 9).offset, 5u);
  // The position is offset + index taken exactly, past 2^64.
  EXPECT_EQ(hostGeneratorIndexToStream(~0ull, 1).subsequence, 0u);
  EXPECT_EQ(hostGeneratorIndexToStream(~0ull, 1).offset, 1ull << 48);
}

TEST(PhiloxHostGenerator, RawAndUniformOverSeedsOffsetsLengths) {
  CKPT_HOST_GENERATOR(g);
  std::mt19937_64 rng(20240611);
  std::vector<uint64_t> seeds = {0, 1, 2, 0xffffffffull, 0x100000000ull, (1ull << 63) + 5, ~0ull};
  std::vector<uint64_t> offsets = {0, 1, 3, 4, 5, 262143, 262147, (1ull << 33) + 7, ~0ull - 5};
  for (int k = 0; k < 2; ++k) seeds.push_back(rng());
  for (int k = 0; k < 2; ++k) offsets.push_back(rng() >> (k * 24));
  // Repositioning the host generator costs ~15 ms (it re-initialises all 65536 emulated threads), so each
  // (seed, offset) is positioned once and then read by successive raw and uniform calls of assorted lengths.
  const size_t lengths[] = {1, 2, 3, 4, 5, 17, 1000};
  size_t call = 0;
  for (uint64_t seed : seeds) {
    for (uint64_t off : offsets) {
      SCOPED_TRACE(::testing::Message() << "seed " << seed << " offset " << off);
      ASSERT_TRUE(position(g, seed, off));
      uint64_t drawn = 0;
      for (int k = 0; k < 4; ++k, ++call) {
        const size_t n = lengths[call % std::size(lengths)];
        if ((call / std::size(lengths) + k) % 2 == 0) {
          ASSERT_TRUE(rawMatches(g, seed, off, drawn, n));
        } else {
          ASSERT_TRUE(uniformMatches(g, seed, off, drawn, n));
        }
        drawn += n;
      }
    }
  }
}

TEST(PhiloxHostGenerator, MillionValuesAcrossThreadWraps) {
  CKPT_HOST_GENERATOR(g);
  // 2^20 + 3 raw values: four full rounds of the 65536 emulated threads and a partial fifth.
  ASSERT_TRUE(position(g, 0x243f6a8885a308d3ull, 0));
  ASSERT_TRUE(rawMatches(g, 0x243f6a8885a308d3ull, 0, 0, (1u << 20) + 3));
  // A million uniforms from an odd, large offset.
  const uint64_t off = (1ull << 33) + 7;
  ASSERT_TRUE(position(g, (1ull << 63) + 5, off));
  ASSERT_TRUE(uniformMatches(g, (1ull << 63) + 5, off, 0, 1000000));
  // Across the 2^64 position boundary.
  ASSERT_TRUE(position(g, 3, ~0ull - 262144 * 2 - 1));
  ASSERT_TRUE(rawMatches(g, 3, ~0ull - 262144 * 2 - 1, 0, 262144 * 3 + 9));
}

TEST(PhiloxHostGenerator, SuccessiveCallsContinueExactly) {
  CKPT_HOST_GENERATOR(g);
  const uint64_t seed = 0xdeadbeefcafef00dull;
  // Every call, raw or uniform, advances the position by exactly its length (no rounding to a block of 4), and
  // the position runs on past 2^64 (here during the fourth call).
  for (const uint64_t base : {uint64_t{5}, uint64_t{~0ull - 262150}}) {
    SCOPED_TRACE(::testing::Message() << "offset " << base);
    ASSERT_TRUE(position(g, seed, base));
    const size_t lengths[] = {1, 3, 2, 262143, 4, 7, 100001, 5};
    uint64_t drawn = 0;
    for (size_t k = 0; k < std::size(lengths); ++k) {
      const size_t n = lengths[k];
      if (k % 2 == 0) {
        ASSERT_TRUE(rawMatches(g, seed, base, drawn, n)) << "call " << k;
      } else {
        ASSERT_TRUE(uniformMatches(g, seed, base, drawn, n)) << "call " << k;
      }
      drawn += n;
    }
  }
  // curandSetGeneratorOffset is absolute: setting seed then offset after draws repositions exactly.
  ASSERT_TRUE(position(g, seed + 1, 12));
  ASSERT_TRUE(rawMatches(g, seed + 1, 12, 0, 300));
  ASSERT_TRUE(position(g, seed, 12));
  ASSERT_TRUE(rawMatches(g, seed, 12, 0, 300));
}

TEST(PhiloxHostGenerator, SupportedOrderingsShareTheMapping) {
  CKPT_HOST_GENERATOR(g);
  const curandOrdering orderings[] = {CURAND_ORDERING_PSEUDO_DEFAULT, CURAND_ORDERING_PSEUDO_BEST,
                                      CURAND_ORDERING_PSEUDO_LEGACY};
  for (curandOrdering o : orderings) {
    SCOPED_TRACE(::testing::Message() << "ordering " << static_cast<int>(o));
    ASSERT_TRUE(position(g, 77, 262141, o));
    ASSERT_TRUE(rawMatches(g, 77, 262141, 0, 262144 + 11));
    ASSERT_TRUE(position(g, 78, 9, o));
    ASSERT_TRUE(uniformMatches(g, 78, 9, 0, 1001));
  }
}

TEST(PhiloxHostGenerator, RandomSeedsOffsetsLengths) {
  CKPT_HOST_GENERATOR(g);
  const bool ok = rc::check("host generator == curandGeneratorBits", [&g] {
    const uint64_t seed = *rc::gen::oneOf(
        rc::gen::arbitrary<uint64_t>(),
        rc::gen::map(rc::gen::arbitrary<uint32_t>(), [](uint32_t x) { return static_cast<uint64_t>(x); }));
    const uint64_t off = *rc::gen::oneOf(rc::gen::arbitrary<uint64_t>(), rc::gen::inRange<uint64_t>(0, 1u << 20),
                                         rc::gen::inRange<uint64_t>(0, 16));
    const size_t n = *rc::gen::inRange<size_t>(1, 3000);
    const bool uniform = *rc::gen::arbitrary<bool>();
    const ::testing::AssertionResult positioned = position(g, seed, off);
    if (!positioned) RC_FAIL(positioned.message());
    const ::testing::AssertionResult r = uniform ? uniformMatches(g, seed, off, 0, n) : rawMatches(g, seed, off, 0, n);
    if (!r) RC_FAIL(r.message());
  });
  EXPECT_TRUE(ok);
}

}  // namespace
}  // namespace ckpt
