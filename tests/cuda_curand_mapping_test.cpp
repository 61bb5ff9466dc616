// The dropout kernel body's Philox stream against cuRAND's host generator (CURAND_RNG_PSEUDO_PHILOX4_32_10,
// runs without a GPU), through the mapping reference/philox.h documents (hostGeneratorIndexToStream): output
// index p of a generator positioned at 0 is stream (subsequence (p / 4) mod 65536, offset (p / 262144) * 4 + p mod
// 4). So stream (seed, s, o) for s < 65536 is generator index (o / 4) * 262144 + 4 s + o mod 4, and one Philox
// block of the kernel (4 draws) is 4 consecutive generator outputs.
// Checked: the body's raw draws (PhiloxDraws) bit for bit, and its dropout masks against curandGenerateUniform's
// floats compared with p. The stateful generator model draws from subsequence 0, so every stateful-model mask is
// covered; counter-model subsequences (>= 2^40) are beyond the host generator's 65536 and are checked against the
// device API instead (tests/philox_curand_test.cpp on the host, tests/cuda_gpu_test.cpp on a GPU).
#include <curand.h>
#include <gtest/gtest.h>

#include <cstring>
#include <vector>

#include "device/exec_host.h"
#include "device/kernels/dropout.cuh"

namespace ckpt::gpu::test {
namespace {

class HostGenerator {
 public:
  HostGenerator() { status_ = curandCreateGeneratorHost(&gen_, CURAND_RNG_PSEUDO_PHILOX4_32_10); }
  ~HostGenerator() {
    if (status_ == CURAND_STATUS_SUCCESS) curandDestroyGenerator(gen_);
  }
  HostGenerator(const HostGenerator&) = delete;
  HostGenerator& operator=(const HostGenerator&) = delete;
  curandStatus_t status() const { return status_; }
  curandGenerator_t get() const { return gen_; }

 private:
  curandGenerator_t gen_{};
  curandStatus_t status_ = CURAND_STATUS_NOT_INITIALIZED;
};

constexpr uint64_t kRound = 4 * kCurandPhiloxThreads;  // generator outputs per Philox block index

// Raw generator output covering the Philox blocks [b0, b0 + blocks) of every subsequence, positioned once.
std::vector<uint32_t> generatorBlocks(const HostGenerator& g, uint64_t seed, uint64_t b0, uint64_t blocks) {
  EXPECT_EQ(curandSetPseudoRandomGeneratorSeed(g.get(), seed), CURAND_STATUS_SUCCESS);
  EXPECT_EQ(curandSetGeneratorOffset(g.get(), b0 * kRound), CURAND_STATUS_SUCCESS);
  std::vector<uint32_t> v(blocks * kRound);
  EXPECT_EQ(curandGenerate(g.get(), v.data(), v.size()), CURAND_STATUS_SUCCESS);
  return v;
}

std::vector<float> generatorUniformBlocks(const HostGenerator& g, uint64_t seed, uint64_t b0, uint64_t blocks) {
  EXPECT_EQ(curandSetPseudoRandomGeneratorSeed(g.get(), seed), CURAND_STATUS_SUCCESS);
  EXPECT_EQ(curandSetGeneratorOffset(g.get(), b0 * kRound), CURAND_STATUS_SUCCESS);
  std::vector<float> v(blocks * kRound);
  EXPECT_EQ(curandGenerateUniform(g.get(), v.data(), v.size()), CURAND_STATUS_SUCCESS);
  return v;
}

struct Stream {
  uint64_t seed, subsequence, offset;
  int64_t n;
};

const Stream kStreams[] = {
    {0, 0, 0, 1},
    {77, 0, 0, 41},
    {77, 0, 3, 41},
    {77, 1, 6, 17},
    {5, 65535, 262147, 9},
    {(1ull << 63) + 5, 0, (1ull << 40) + 2, 23},
    {0xdeadbeefull, 4242, 1, 64},
};

TEST(DropoutBodyVsCurandHostGenerator, RawDrawsAreBitIdentical) {
  HostGenerator g;
  ASSERT_EQ(g.status(), CURAND_STATUS_SUCCESS) << "curandCreateGeneratorHost(PHILOX4_32_10) failed";
  HostExec hx;
  for (const Stream& s : kStreams) {
    SCOPED_TRACE(::testing::Message() << "seed " << s.seed << " subsequence " << s.subsequence << " offset "
                                      << s.offset);
    std::vector<uint32_t> body(static_cast<size_t>(s.n));
    hx.launch(philoxBlocksFor(s.offset, s.n), PhiloxDraws{body.data(), s.n, DrawPos{s.seed, s.subsequence, s.offset}});
    const uint64_t b0 = s.offset / 4, blocks = static_cast<uint64_t>(philoxBlocksFor(s.offset, s.n));
    const std::vector<uint32_t> gen = generatorBlocks(g, s.seed, b0, blocks);
    for (int64_t i = 0; i < s.n; ++i) {
      const uint64_t pos = s.offset + static_cast<uint64_t>(i);
      const uint64_t index = (pos / 4 - b0) * kRound + 4 * s.subsequence + pos % 4;
      ASSERT_EQ(body[static_cast<size_t>(i)], gen[index]) << "draw " << i;
    }
  }
}

TEST(DropoutBodyVsCurandHostGenerator, MasksAreBitIdentical) {
  HostGenerator g;
  ASSERT_EQ(g.status(), CURAND_STATUS_SUCCESS) << "curandCreateGeneratorHost(PHILOX4_32_10) failed";
  HostExec hx;
  for (const Stream& s : kStreams) {
    for (double p : {0.1, 0.5}) {
      SCOPED_TRACE(::testing::Message() << "seed " << s.seed << " subsequence " << s.subsequence << " offset "
                                        << s.offset << " p " << p);
      const std::vector<float> x(static_cast<size_t>(s.n), 1.0f);
      std::vector<float> out(x.size()), mask(x.size());
      const float scale = 1.0f / (1.0f - static_cast<float>(p));
      hx.launch(philoxBlocksFor(s.offset, s.n),
                DropoutForward<float>{out.data(), mask.data(), x.data(), s.n, DrawPos{s.seed, s.subsequence, s.offset},
                                      p, scale});
      const uint64_t b0 = s.offset / 4, blocks = static_cast<uint64_t>(philoxBlocksFor(s.offset, s.n));
      const std::vector<float> u = generatorUniformBlocks(g, s.seed, b0, blocks);
      for (int64_t i = 0; i < s.n; ++i) {
        const uint64_t pos = s.offset + static_cast<uint64_t>(i);
        const float ui = u[(pos / 4 - b0) * kRound + 4 * s.subsequence + pos % 4];
        const float want = static_cast<double>(ui) > p ? scale : 0.0f;
        ASSERT_EQ(std::memcmp(&mask[static_cast<size_t>(i)], &want, sizeof want), 0)
            << "element " << i << ": mask " << mask[static_cast<size_t>(i)] << ", cuRAND uniform " << ui;
      }
    }
  }
}

}  // namespace
}  // namespace ckpt::gpu::test
