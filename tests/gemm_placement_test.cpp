// The matrix products (cmake/gemm.cmake: OpenBLAS by default, Eigen's kernels with CKPT_GEMM=eigen) give the same
// bits wherever their operands and result lie and whatever other threads do. Every bitwise property of ckptcheck
// rests on this: a recompute multiplies the same values as the store-all step did, but from other buffers (a
// checkpoint's copy, another arena offset, a micro-batch's rows of a larger tensor), and `verify --threads N` runs
// steps on several threads at once. A library whose sums followed the operands' alignment (as MKL's do outside its
// conditional-numerical-reproducibility mode) or shared a buffer between threads would fail here, not as a false
// finding in someone's CI.
#include <gtest/gtest.h>
#include <rapidcheck/gtest.h>

#include <atomic>
#include <cstring>
#include <random>
#include <thread>
#include <vector>

#include "reference/gemm.h"
#include "reference/tensor.h"

namespace ckpt {
namespace {

// Values from a seed RapidCheck draws (drawing each of up to 90,000 elements from RapidCheck would take longer
// than the products).
template <class T>
Mat<T> randomMat(int64_t rows, int64_t cols, uint32_t seed) {
  std::mt19937 gen(seed);
  std::uniform_int_distribution<int> u(-1000, 1000);
  Mat<T> m(rows, cols);
  for (int64_t i = 0; i < m.size(); ++i) m.data()[i] = static_cast<T>(u(gen)) / T(977);
  return m;
}

template <class T>
bool sameBits(const Mat<T>& a, const Mat<T>& b) {
  return a.rows() == b.rows() && a.cols() == b.cols() &&
         std::memcmp(a.data(), b.data(), sizeof(T) * static_cast<size_t>(a.size())) == 0;
}

// The three products of a linear layer (reference/ops/linear.h), on row-major operands as the ops hold them.
template <class T, class X, class W, class D>
std::vector<Mat<T>> linearProducts(const X& x, const W& w, const D& dy) {
  std::vector<Mat<T>> r(3);
  r[0].noalias() = x * w.transpose();  // forward
  r[1] = Mat<T>::Zero(w.rows(), w.cols());
  r[1].noalias() += dy.transpose() * x;  // weight gradient, accumulated as Param::grad is
  r[2].noalias() = dy * w;               // input gradient
  return r;
}

// A matrix's values at an offset of `shift` elements into a larger buffer (so misaligned for any shift that is not a
// multiple of the SIMD width), seen through a Map with the given leading dimension (`ld` >= cols: a block of a
// wider matrix, as an attention head's columns of the fused projection are).
template <class T>
class Placed {
 public:
  Placed(const Mat<T>& m, int shift, int64_t ld)
      : rows_(m.rows()),
        cols_(m.cols()),
        ld_(ld),
        shift_(shift),
        buffer_(static_cast<size_t>(shift + m.rows() * ld), T(7)) {
    for (int64_t r = 0; r < rows_; ++r)
      std::memcpy(buffer_.data() + shift + r * ld, m.data() + r * cols_, sizeof(T) * static_cast<size_t>(cols_));
  }
  auto view() const {
    using Strided = Eigen::Map<const Mat<T>, Eigen::Unaligned, Eigen::OuterStride<>>;
    return Strided(buffer_.data() + shift_, rows_, cols_, Eigen::OuterStride<>(ld_));
  }

 private:
  int64_t rows_, cols_, ld_;
  int shift_;
  std::vector<T> buffer_;
};

// The engine's recompute runs the same op code as the store-all step, so the layout (contiguous, or a block with
// the same leading dimension) is the same in both and only the addresses differ: that is the property. (One
// product need not give the same bits for two layouts: a one-column operand with another leading dimension can
// take another kernel, which this test found before it compared like with like.)
template <class T>
void productsIgnorePlacement() {
  // Sizes from a few elements (Eigen's coefficient-wise products, OpenBLAS's small-matrix kernels, the
  // matrix-vector paths of a single row or column) to a few hundred (packed, blocked kernels, several cache blocks
  // of k).
  const int64_t n = *rc::gen::inRange<int64_t>(1, 300), in = *rc::gen::inRange<int64_t>(1, 300),
                out = *rc::gen::inRange<int64_t>(1, 300);
  const int shift = *rc::gen::inRange(1, 17), extra = *rc::gen::inRange(1, 9);
  const uint32_t seed = *rc::gen::arbitrary<uint32_t>();
  const Mat<T> x = randomMat<T>(n, in, seed), w = randomMat<T>(out, in, seed + 1), dy = randomMat<T>(n, out, seed + 2);

  // Contiguous: aligned (Eigen's own allocation) against misaligned by `shift` elements.
  const std::vector<Mat<T>> base = linearProducts<T>(x, w, dy);
  const Placed<T> sx(x, shift, in), sw(w, shift, in), sd(dy, shift, out);
  const std::vector<Mat<T>> shifted = linearProducts<T>(sx.view(), sw.view(), sd.view());
  // Blocks of wider matrices: the same leading dimensions at two offsets.
  const Placed<T> ax(x, 0, in + extra), aw(w, 0, in + extra), ad(dy, 0, out + extra);
  const Placed<T> bx(x, shift, in + extra), bw(w, shift, in + extra), bd(dy, shift, out + extra);
  const std::vector<Mat<T>> blockA = linearProducts<T>(ax.view(), aw.view(), ad.view());
  const std::vector<Mat<T>> blockB = linearProducts<T>(bx.view(), bw.view(), bd.view());
  for (size_t i = 0; i < base.size(); ++i) {
    RC_ASSERT(sameBits(base[i], shifted[i]));
    RC_ASSERT(sameBits(blockA[i], blockB[i]));
  }
  // A micro-batch's rows, multiplied where they lie inside the whole batch, and copied out on their own.
  const int64_t first = *rc::gen::inRange<int64_t>(0, n), rows = *rc::gen::inRange<int64_t>(1, n - first + 1);
  const Mat<T> part = x.middleRows(first, rows);
  Mat<T> inPlace, alone;
  inPlace.noalias() = x.middleRows(first, rows) * w.transpose();
  alone.noalias() = part * w.transpose();
  RC_ASSERT(sameBits(inPlace, alone));
}

RC_GTEST_PROP(GemmPlacement, floatProductsIgnoreOffsetStrideAndBatchSlice, ()) { productsIgnorePlacement<float>(); }
RC_GTEST_PROP(GemmPlacement, doubleProductsIgnoreOffsetStrideAndBatchSlice, ()) { productsIgnorePlacement<double>(); }

TEST(GemmThreads, concurrentProductsMatchSerialOnes) {
  useOneGemmThread();
  // Two threads multiply at once, many times each; the bits must be those of the same products run alone. The
  // operands are fixed (a seeded pattern), sized past OpenBLAS's small-matrix path into its buffer pool.
  auto operands = [](int t) {
    Mat<float> a(160 + 8 * t, 200), b(200, 120);
    for (int64_t i = 0; i < a.size(); ++i) a.data()[i] = static_cast<float>((i * 37 + t) % 101) / 53.f - 1.f;
    for (int64_t i = 0; i < b.size(); ++i) b.data()[i] = static_cast<float>((i * 11 + 3 * t) % 89) / 47.f - 1.f;
    return std::pair{a, b};
  };
  std::vector<Mat<float>> serial;
  for (int t = 0; t < 2; ++t) {
    auto [a, b] = operands(t);
    serial.push_back(a * b);
  }
  std::atomic<int> mismatches{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 2; ++t)
    threads.emplace_back([&, t] {
      auto [a, b] = operands(t);
      for (int rep = 0; rep < 400; ++rep) {
        Mat<float> c = a * b;
        if (!sameBits(c, serial[static_cast<size_t>(t)])) ++mismatches;
      }
    });
  for (auto& th : threads) th.join();
  EXPECT_EQ(mismatches.load(), 0) << "products run on two threads at once differ from the same products alone";
}

TEST(GemmThreads, runsUseOneThreadOfTheThreadSafeBuild) {
  useOneGemmThread();
  const GemmInfo g = gemmInfo();
  EXPECT_EQ(g.threads, 1) << g.library << ": " << g.config;
#if defined(CKPT_GEMM_OPENBLAS)
  // The serial build of Debian's OpenBLAS has no locking around its buffers; the build links the pthread one by
  // path (cmake/gemm.cmake), and this is what the loader actually found.
  EXPECT_TRUE(g.threaded) << "the loaded OpenBLAS is a single-threaded build: " << g.config;
  EXPECT_FALSE(g.kernels.empty());
#else
  EXPECT_EQ(g.library, "eigen");
#endif
}

}  // namespace
}  // namespace ckpt
