// philoxUniforms (reference/philox.h), the batched draws dropout, attention dropout and weight initialisation use,
// against the per-draw definition uniformFromBits(philoxBits(...)) that tests/philox_curand_test.cpp pins to
// cuRAND: bit for bit at every offset alignment, across batch and block boundaries, for lengths shorter than a
// block, and where the 64-bit offset wraps. Also RngDraw::uniforms against RngDraw::uniform.
#include <gtest/gtest.h>

#include <bit>
#include <cstdint>
#include <vector>

#include "reference/philox.h"
#include "reference/rng.h"

namespace ckpt {
namespace {

void expectBatchEqualsPerDraw(uint64_t seed, uint64_t subsequence, uint64_t offset, int64_t n) {
  std::vector<float> got(static_cast<size_t>(n) + 1, -1.0f);
  philoxUniforms(seed, subsequence, offset, n, got.data());
  for (int64_t i = 0; i < n; ++i) {
    const float want = uniformFromBits(philoxBits(seed, subsequence, offset + static_cast<uint64_t>(i)));
    ASSERT_EQ(std::bit_cast<uint32_t>(got[static_cast<size_t>(i)]), std::bit_cast<uint32_t>(want))
        << "seed " << seed << " subsequence " << subsequence << " offset " << offset << " n " << n << " i " << i;
  }
  EXPECT_EQ(got[static_cast<size_t>(n)], -1.0f) << "wrote past n";
}

TEST(PhiloxBatch, EveryAlignmentAndLengthAroundTheBatch) {
  const int64_t batch = 4 * kPhiloxBatch;
  for (uint64_t offset = 0; offset < 8; ++offset)
    for (int64_t n : {int64_t{0}, int64_t{1}, int64_t{3}, int64_t{4}, int64_t{5}, batch - 1, batch, batch + 1,
                      2 * batch + 3, int64_t{1000}, int64_t{4099}})
      expectBatchEqualsPerDraw(0x1234567890abcdefULL, 7, offset, n);
}

TEST(PhiloxBatch, LargeSeedsSubsequencesAndOffsets) {
  expectBatchEqualsPerDraw(~uint64_t{0}, ~uint64_t{0}, uint64_t{1} << 40, 777);
  expectBatchEqualsPerDraw(42, uint64_t{1} << 33, (uint64_t{1} << 34) + 2, 300);
}

TEST(PhiloxBatch, OffsetWrapsPast64Bits) {
  // The per-draw definition wraps offset + i modulo 2^64; the batch must do the same inside a batch.
  expectBatchEqualsPerDraw(9, 3, ~uint64_t{0} - 37, 200);
  expectBatchEqualsPerDraw(9, 3, ~uint64_t{0} - 31, 4 * 4 * kPhiloxBatch);  // aligned, wraps mid-batch
}

TEST(PhiloxBatch, RngDrawUniformsIsUniform) {
  for (const RngDraw d : {RngDraw{5, 0, 12}, RngDraw{5, 99, 0}, RngDraw{77, 3, 6}}) {
    std::vector<float> u(500);
    d.uniforms(13, 500, u.data());
    for (int64_t i = 0; i < 500; ++i)
      ASSERT_EQ(std::bit_cast<uint32_t>(u[static_cast<size_t>(i)]), std::bit_cast<uint32_t>(d.uniform(13 + i))) << i;
  }
}

}  // namespace
}  // namespace ckpt
