// The device backend's kernel bodies and device ops, run on the CPU through the host launcher (HostExec), against
// the CPU reference ops (reference/ops/*.h). Bitwise wherever the body performs the reference's operations in
// the reference's order: every elementwise op (ReLU, tanh, GELU both forms, add, bias add, bf16 rounding, SGD,
// gradient accumulation), dropout and attention-dropout masks and outputs for both generator models and odd
// offsets, drop-path scales and RReLU noise (the same Philox walk), LayerNorm parameter gradients, cross-entropy
// and MSE input gradients, moe's routing (on dyadic inputs, where the router's products are exact). Linear,
// attention and moe are also checked under bf16 inputs (Numerics::bf16Inputs). Within kHostRtol
// (tests/cuda_tolerance.h) where a sum runs in another order (LayerNorm/BatchNorm statistics, softmax sums,
// column sums, GEMMs, the losses' means). GEMM arguments are also checked against cuBLAS's column-major contract.
#include <gtest/gtest.h>

#include <algorithm>
#include <memory>
#include <set>
#include <vector>

#include "device/dops.h"
#include "device/exec_host.h"
#include "device/kernels/token_stem.cuh"
#include "harness/engine/device_bridge.h"
#include "reference/ops/add.h"
#include "reference/ops/attention.h"
#include "reference/ops/batchnorm.h"
#include "reference/ops/drop_path.h"
#include "reference/ops/dropout.h"
#include "reference/ops/gelu.h"
#include "reference/ops/layernorm.h"
#include "reference/ops/linear.h"
#include "reference/ops/lm_head.h"
#include "reference/ops/moe.h"
#include "reference/ops/relu.h"
#include "reference/ops/rrelu.h"
#include "reference/ops/tanh.h"
#include "reference/ops/token_stem.h"
#include "tests/cuda_test_util.h"

namespace ckpt::gpu::test {
namespace {

template <class T>
class HostKernels : public ::testing::Test {};
using Scalars = ::testing::Types<float, double>;
TYPED_TEST_SUITE(HostKernels, Scalars);

template <class T>
Tensor<T> tensorOf(const Mat<T>& m) {
  return Tensor<T>::from(m);
}

// ---------------------------------------------------------------------------------------------------------------
// Bodies, one by one.

TYPED_TEST(HostKernels, ElementwiseBodiesAreBitwiseTheReference) {
  using T = TypeParam;
  HostExec hx;
  const int64_t r = 13, c = 29, n = r * c;
  Mat<T> x = randomMat<T>(r, c, 1, 3.0), dy = randomMat<T>(r, c, 2), b = randomMat<T>(r, c, 3);
  x(0, 0) = T(0);
  x(0, 1) = -T(0);
  OpEnv env;
  std::vector<Tensor<T>> in{tensorOf(x)};
  Mat<T> out(r, c), d(r, c);

  {  // ReLU
    Relu<T> op;
    Context<T> ctx;
    Tensor<T> y = op.forward(in, &ctx, env);
    hx.launch(n, ReluForward<T>{out.data(), x.data()});
    EXPECT_TRUE(bitwiseEqual("relu forward", out.data(), y.data(), n));
    std::vector<Tensor<T>> din(1);
    op.backward(ctx, tensorOf(dy), din);
    hx.launch(n, ReluBackward<T>{d.data(), y.data(), dy.data()});
    EXPECT_TRUE(bitwiseEqual("relu backward", d.data(), din[0].data(), n));
  }
  {  // tanh
    Tanh<T> op;
    Context<T> ctx;
    Tensor<T> y = op.forward(in, &ctx, env);
    hx.launch(n, TanhForward<T>{out.data(), x.data()});
    EXPECT_TRUE(bitwiseEqual("tanh forward", out.data(), y.data(), n));
    std::vector<Tensor<T>> din(1);
    op.backward(ctx, tensorOf(dy), din);
    hx.launch(n, TanhBackward<T>{d.data(), y.data(), dy.data()});
    EXPECT_TRUE(bitwiseEqual("tanh backward", d.data(), din[0].data(), n));
  }
  for (bool erfForm : {false, true}) {  // GELU, tanh approximation and erf form (Numerics::erfGelu)
    Gelu<T> op;
    Context<T> ctx;
    OpEnv genv;
    genv.numerics.erfGelu = erfForm;
    Tensor<T> y = op.forward(in, &ctx, genv);
    GeluForward<T> body{out.data(), x.data()};
    body.erfForm = erfForm;
    hx.launch(n, body);
    EXPECT_TRUE(bitwiseEqual(erfForm ? "gelu (erf) forward" : "gelu forward", out.data(), y.data(), n));
    std::vector<Tensor<T>> din(1);
    op.backward(ctx, tensorOf(dy), din);
    hx.launch(n, GeluBackward<T>{d.data(), x.data(), dy.data()});
    EXPECT_TRUE(bitwiseEqual("gelu backward", d.data(), din[0].data(), n));
  }
  {  // residual add
    Add<T> op;
    std::vector<Tensor<T>> two{tensorOf(x), tensorOf(b)};
    Tensor<T> y = op.forward(two, nullptr, env);
    hx.launch(n, AddForward<T>{out.data(), x.data(), b.data()});
    EXPECT_TRUE(bitwiseEqual("add forward", out.data(), y.data(), n));
  }
  {  // gradient accumulation as blockBackward does it: g.map() += din.map()
    Mat<T> want = x;
    want += dy;
    Mat<T> got = x;
    hx.launch(n, AccumulateInto<T>{got.data(), dy.data()});
    EXPECT_TRUE(bitwiseEqual("accumulate", got.data(), want.data(), n));
  }
  {  // bias add (Linear's y.rowwise() += b), bf16 rounding, SGD
    Mat<T> bias = randomMat<T>(1, c, 4);
    Mat<T> want = x;
    want.rowwise() += bias.row(0);
    Mat<T> got = x;
    hx.launch(n, BiasAdd<T>{got.data(), bias.data(), c});
    EXPECT_TRUE(bitwiseEqual("bias add", got.data(), want.data(), n));
    want = x.unaryExpr([](T v) { return roundToBf16(v); });
    got = x;
    hx.launch(n, RoundToBf16<T>{got.data()});
    EXPECT_TRUE(bitwiseEqual("bf16 rounding", got.data(), want.data(), n));
    const T lr = static_cast<T>(0.01);
    want = x;
    want -= lr * dy;
    got = x;
    hx.launch(n, SgdUpdate<T>{got.data(), dy.data(), lr});
    EXPECT_TRUE(bitwiseEqual("sgd", got.data(), want.data(), n));
  }
}

// Linear's bias gradient: rows summed in order here, in Eigen's own (blocked) order by colwise().sum().
TYPED_TEST(HostKernels, ColumnSumsMatchEigensColwiseSum) {
  using T = TypeParam;
  HostExec hx;
  for (int64_t rows : {1, 2, 7, 64, 130}) {
    const int64_t cols = 37;
    Mat<T> src = randomMat<T>(rows, cols, 5);
    Mat<T> want = randomMat<T>(1, cols, 6), got = want;
    want += src.colwise().sum();
    hx.launch(cols, ColumnSumAccumulate<T>{got.data(), src.data(), rows, cols});
    EXPECT_TRUE(near("column sums, rows " + std::to_string(rows), got.data(), want.data(), cols, kHostRtol<T>));
  }
}

// Dropout: masks and outputs bit for bit, for both generator models, with draws at every offset phase mod 4 and
// lengths that end mid-block (the body walks whole Philox blocks).
TYPED_TEST(HostKernels, DropoutBodyIsBitwiseTheReference) {
  using T = TypeParam;
  HostExec hx;
  for (int64_t len : {1, 3, 4, 5, 31, 1000}) {
    for (uint64_t offset :
         {uint64_t{0}, uint64_t{1}, uint64_t{2}, uint64_t{3}, uint64_t{4}, uint64_t{262147}, (uint64_t{1} << 40) + 6}) {
      for (uint64_t subsequence : {uint64_t{0}, makeOpKey(2, 5, 3)}) {
        for (double p : {0.1, 0.5, 0.9}) {
          Dropout<T> op(p);
          Mat<T> x = randomMat<T>(1, len, 7);
          const RngDraw draw{77, subsequence, offset};
          NodeDraws replay(nullptr, 0, &draw, nullptr);  // run the reference at exactly this stream position
          const OpEnv env{&replay, {}};
          Context<T> ctx;
          std::vector<Tensor<T>> in{tensorOf(x)};
          Tensor<T> y = op.forward(in, &ctx, env);
          Mat<T> out(1, len), mask(1, len);
          const T scale = T(1) / (T(1) - static_cast<T>(p));
          hx.launch(philoxBlocksFor(offset, len), DropoutForward<T>{out.data(), mask.data(), x.data(), len,
                                                                    DrawPos{77, subsequence, offset}, p, scale});
          const std::string at = "len " + std::to_string(len) + " offset " + std::to_string(offset) + " subsequence " +
                                 std::to_string(subsequence) + " p " + std::to_string(p);
          ASSERT_TRUE(bitwiseEqual("dropout output, " + at, out.data(), y.data(), len));
          ASSERT_TRUE(bitwiseEqual("dropout mask, " + at, mask.data(), ctx.tensors[0].data(), len));
          // Without a mask pointer (no context) the output is the same.
          Mat<T> out2(1, len);
          hx.launch(philoxBlocksFor(offset, len),
                    DropoutForward<T>{out2.data(), nullptr, x.data(), len, DrawPos{77, subsequence, offset}, p, scale});
          ASSERT_TRUE(bitwiseEqual("dropout output without mask, " + at, out2.data(), y.data(), len));
        }
      }
    }
  }
}

// Drop-path: per-sample scales and outputs bit for bit, samples of one row and of several, draws at every offset
// phase mod 4 and sample counts that end mid-block; the backward's scaling too.
TYPED_TEST(HostKernels, DropPathBodiesAreBitwiseTheReference) {
  using T = TypeParam;
  HostExec hx;
  const int64_t width = 5;
  for (int64_t seq : {1, 3}) {
    for (int64_t samples : {1, 3, 4, 5, 31}) {
      for (uint64_t offset : {uint64_t{0}, uint64_t{1}, uint64_t{2}, uint64_t{3}, uint64_t{262147}}) {
        for (uint64_t subsequence : {uint64_t{0}, makeOpKey(2, 5, 3)}) {
          for (double p : {0.1, 0.5, 0.9}) {
            const int64_t rows = samples * seq, n = rows * width;
            DropPath<T> op(seq, p);
            Mat<T> x = randomMat<T>(rows, width, 7), dy = randomMat<T>(rows, width, 8);
            const RngDraw draw{77, subsequence, offset};
            NodeDraws replay(nullptr, 0, &draw, nullptr);
            const OpEnv env{&replay, {}};
            Context<T> ctx;
            std::vector<Tensor<T>> in{tensorOf(x)};
            Tensor<T> y = op.forward(in, &ctx, env);
            std::vector<Tensor<T>> din(1);
            op.backward(ctx, tensorOf(dy), din);
            Mat<T> scales(samples, 1), out(rows, width), dx(rows, width);
            hx.launch(philoxBlocksFor(offset, samples),
                      DropPathScales<T>{scales.data(), samples, DrawPos{77, subsequence, offset}, p,
                                        T(1) / (T(1) - static_cast<T>(p))});
            hx.launch(n, ScaleBySample<T>{out.data(), x.data(), scales.data(), seq * width});
            hx.launch(n, ScaleBySample<T>{dx.data(), dy.data(), scales.data(), seq * width});
            const std::string at = "seq " + std::to_string(seq) + " samples " + std::to_string(samples) + " offset " +
                                   std::to_string(offset) + " subsequence " + std::to_string(subsequence) + " p " +
                                   std::to_string(p);
            ASSERT_TRUE(bitwiseEqual("drop_path scales, " + at, scales.data(), ctx.tensors[0].data(), samples));
            ASSERT_TRUE(bitwiseEqual("drop_path output, " + at, out.data(), y.data(), n));
            ASSERT_TRUE(bitwiseEqual("drop_path dx, " + at, dx.data(), din[0].data(), n));
          }
        }
      }
    }
  }
}

// RReLU: outputs and noise bit for bit (slopes in double, rounded once), zeros of both signs included, for
// several ranges (a collapsed one: deterministic slopes) and offsets; without a noise pointer the same output.
TYPED_TEST(HostKernels, RreluBodyIsBitwiseTheReference) {
  using T = TypeParam;
  HostExec hx;
  for (int64_t len : {1, 3, 5, 31, 1000}) {
    for (uint64_t offset : {uint64_t{0}, uint64_t{1}, uint64_t{3}, uint64_t{4}, (uint64_t{1} << 40) + 6}) {
      for (uint64_t subsequence : {uint64_t{0}, makeOpKey(2, 5, 3)}) {
        for (auto [lower, upper] : {std::pair{0.125, 1.0 / 3.0}, std::pair{0.3, 0.3}, std::pair{0.0, 0.99}}) {
          Rrelu<T> op(lower, upper);
          Mat<T> x = randomMat<T>(1, len, 9, 2.0);
          x(0, 0) = -T(0);
          if (len > 1) x(0, 1) = T(0);
          const RngDraw draw{77, subsequence, offset};
          NodeDraws replay(nullptr, 0, &draw, nullptr);
          const OpEnv env{&replay, {}};
          Context<T> ctx;
          std::vector<Tensor<T>> in{tensorOf(x)};
          Tensor<T> y = op.forward(in, &ctx, env);
          Mat<T> out(1, len), noise(1, len), out2(1, len);
          const DrawPos pos{77, subsequence, offset};
          hx.launch(philoxBlocksFor(offset, len),
                    RreluForward<T>{out.data(), noise.data(), x.data(), len, pos, lower, upper});
          hx.launch(philoxBlocksFor(offset, len),
                    RreluForward<T>{out2.data(), nullptr, x.data(), len, pos, lower, upper});
          const std::string at = "len " + std::to_string(len) + " offset " + std::to_string(offset) + " subsequence " +
                                 std::to_string(subsequence) + " range " + std::to_string(lower) + ".." +
                                 std::to_string(upper);
          ASSERT_TRUE(bitwiseEqual("rrelu output, " + at, out.data(), y.data(), len));
          ASSERT_TRUE(bitwiseEqual("rrelu noise, " + at, noise.data(), ctx.tensors[0].data(), len));
          ASSERT_TRUE(bitwiseEqual("rrelu output without noise, " + at, out2.data(), y.data(), len));
        }
      }
    }
  }
}

TYPED_TEST(HostKernels, PhiloxDrawsBodyIsPhiloxBits) {
  HostExec hx;
  for (uint64_t offset : {uint64_t{0}, uint64_t{3}, uint64_t{5}, ~uint64_t{0} - 64}) {
    const int64_t n = 41;
    std::vector<uint32_t> got(n);
    hx.launch(philoxBlocksFor(offset, n), PhiloxDraws{got.data(), n, DrawPos{9, 11, offset}});
    for (int64_t i = 0; i < n; ++i)
      ASSERT_EQ(got[i], philoxBits(9, 11, offset + i)) << "offset " << offset << " i " << i;
  }
}

template <class T>
void checkLayerNormBodies(int64_t n, int64_t c) {
  HostExec hx;
  LayerNorm<T> op("ln", c);
  op.params()[0]->value = randomMat<T>(1, c, 8, 0.5).array() + T(1);
  op.params()[1]->value = randomMat<T>(1, c, 9, 0.1);
  op.params()[0]->grad = randomMat<T>(1, c, 10);
  op.params()[1]->grad = randomMat<T>(1, c, 11);
  Mat<T> x = randomMat<T>(n, c, 12, 2.0), dy = randomMat<T>(n, c, 13);
  // Body outputs first (parameter gradients accumulate onto the same starting values as the reference's).
  Mat<T> y(n, c), mean(n, 1), rstd(n, 1), dx(n, c);
  Mat<T> dw = op.params()[0]->grad, db = op.params()[1]->grad;
  const Mat<T> w = op.params()[0]->value, b = op.params()[1]->value;
  OpEnv env;
  Context<T> ctx;
  std::vector<Tensor<T>> in{tensorOf(x)};
  Tensor<T> yr = op.forward(in, &ctx, env);
  Mat<T> partial(n, 2 * kLayerNormLanes);
  layerNormForward(hx, y.data(), mean.data(), rstd.data(), x.data(), w.data(), b.data(), n, c, static_cast<T>(op.eps()),
                   partial.data());
  EXPECT_TRUE(near("layernorm y", y.data(), yr.data(), n * c, kHostRtol<T>));
  EXPECT_TRUE(near("layernorm mean", mean.data(), ctx.tensors[1].data(), n, kHostRtol<T>));
  EXPECT_TRUE(near("layernorm rstd", rstd.data(), ctx.tensors[2].data(), n, kHostRtol<T>));
  std::vector<Tensor<T>> din(1);
  op.backward(ctx, tensorOf(dy), din);
  // Backward from the reference's own statistics: the input gradient differs only by its two row sums, the
  // parameter gradients accumulate row by row exactly as the reference does.
  layerNormBackwardInput(hx, dx.data(), dy.data(), x.data(), ctx.tensors[1].data(), ctx.tensors[2].data(), w.data(), n,
                         c, partial.data());
  EXPECT_TRUE(near("layernorm dx", dx.data(), din[0].data(), n * c, kHostRtol<T>));
  Mat<T> inPlace = dy;  // the LM head's call: dx written over dy
  layerNormBackwardInput(hx, inPlace.data(), inPlace.data(), x.data(), ctx.tensors[1].data(), ctx.tensors[2].data(),
                         w.data(), n, c, partial.data());
  EXPECT_TRUE(bitwiseEqual("layernorm dx in place", inPlace.data(), dx.data(), n * c));
  hx.launch(c, LayerNormBackwardParams<T>{dw.data(), db.data(), dy.data(), x.data(), ctx.tensors[1].data(),
                                          ctx.tensors[2].data(), n, c});
  EXPECT_TRUE(bitwiseEqual("layernorm dweight", dw.data(), op.params()[0]->grad.data(), c));
  EXPECT_TRUE(bitwiseEqual("layernorm dbias", db.data(), op.params()[1]->grad.data(), c));
}

// Widths below, across and above the row walks' 32 lanes (lanes with no column, with one and with several).
TYPED_TEST(HostKernels, LayerNormBodies) {
  for (int64_t c : {5, 48, 97}) {
    SCOPED_TRACE("width " + std::to_string(c));
    checkLayerNormBodies<TypeParam>(24, c);
  }
}

TYPED_TEST(HostKernels, BatchNormBodies) {
  using T = TypeParam;
  HostExec hx;
  const int64_t n = 33, c = 20;
  BatchNorm<T> op("bn", c);
  op.params()[0]->value = randomMat<T>(1, c, 14, 0.5).array() + T(1);
  op.params()[1]->value = randomMat<T>(1, c, 15, 0.1);
  op.buffers()[0]->value = randomMat<T>(1, c, 16, 0.1);
  op.buffers()[1]->value = randomMat<T>(1, c, 17, 0.1).array() + T(1);
  op.buffers()[2]->value(0, 0) = T(3);
  const Mat<T> w = op.params()[0]->value, b = op.params()[1]->value;
  Mat<T> runMean = op.buffers()[0]->value, runVar = op.buffers()[1]->value, nbt = op.buffers()[2]->value;
  Mat<T> dw = op.params()[0]->grad, db = op.params()[1]->grad;
  Mat<T> x = randomMat<T>(n, c, 18, 2.0), dy = randomMat<T>(n, c, 19);
  Mat<T> y(n, c), mean(1, c), rstd(1, c), dx(n, c);
  OpEnv env;
  Context<T> ctx;
  std::vector<Tensor<T>> in{tensorOf(x)};
  Tensor<T> yr = op.forward(in, &ctx, env);
  hx.launch(c,
            BatchNormForward<T>{y.data(), mean.data(), rstd.data(), runMean.data(), runVar.data(), nbt.data(), x.data(),
                                w.data(), b.data(), n, c, static_cast<T>(op.eps()), static_cast<T>(op.momentum())});
  EXPECT_TRUE(near("batchnorm y", y.data(), yr.data(), n * c, kHostRtol<T>));
  EXPECT_TRUE(near("batchnorm mean", mean.data(), ctx.tensors[1].data(), c, kHostRtol<T>));
  EXPECT_TRUE(near("batchnorm rstd", rstd.data(), ctx.tensors[2].data(), c, kHostRtol<T>));
  EXPECT_TRUE(near("batchnorm running_mean", runMean.data(), op.buffers()[0]->value.data(), c, kHostRtol<T>));
  EXPECT_TRUE(near("batchnorm running_var", runVar.data(), op.buffers()[1]->value.data(), c, kHostRtol<T>));
  EXPECT_TRUE(bitwiseEqual("batchnorm num_batches_tracked", nbt.data(), op.buffers()[2]->value.data(), 1));
  std::vector<Tensor<T>> din(1);
  op.backward(ctx, tensorOf(dy), din);
  hx.launch(c, BatchNormBackward<T>{dx.data(), dw.data(), db.data(), dy.data(), x.data(), ctx.tensors[1].data(),
                                    ctx.tensors[2].data(), w.data(), n, c});
  EXPECT_TRUE(near("batchnorm dx", dx.data(), din[0].data(), n * c, kHostRtol<T>));
  EXPECT_TRUE(near("batchnorm dweight", dw.data(), op.params()[0]->grad.data(), c, kHostRtol<T>));
  EXPECT_TRUE(near("batchnorm dbias", db.data(), op.params()[1]->grad.data(), c, kHostRtol<T>));
}

// Causal softmax on raw scores q k^T (hostGemm), against the probabilities the reference attention saves;
// masked positions exactly 0. Then the softmax backward against a direct evaluation of the reference's formula.
TYPED_TEST(HostKernels, CausalSoftmaxBodies) {
  using T = TypeParam;
  HostExec hx;
  const int64_t batch = 2, heads = 3, seq = 9, hd = 4, c = heads * hd;
  CausalSelfAttention<T> op(heads, seq, 0.0);
  Mat<T> qkv = randomMat<T>(batch * seq, 3 * c, 20, 2.0);
  OpEnv env;
  Context<T> ctx;
  std::vector<Tensor<T>> in{tensorOf(qkv)};
  (void)op.forward(in, &ctx, env);
  const Mat<T>& probsRef = Mat<T>(ctx.tensors[1].map());
  Mat<T> scores(batch * heads * seq, seq);
  for (int64_t b = 0; b < batch; ++b) {
    for (int64_t h = 0; h < heads; ++h) {
      Gemm<T> g;
      g.transB = true;
      g.m = seq, g.n = seq, g.k = hd;
      g.a = qkv.data() + b * seq * 3 * c + h * hd, g.lda = 3 * c;
      g.b = qkv.data() + b * seq * 3 * c + c + h * hd, g.ldb = 3 * c;
      g.c = scores.data() + (b * heads + h) * seq * seq, g.ldc = seq;
      hostGemm(g);
    }
  }
  const T scale = T(1) / std::sqrt(static_cast<T>(hd));
  Mat<T> probs = scores;
  hx.launch(probs.rows(), CausalSoftmaxForward<T>{probs.data(), seq, scale});
  EXPECT_TRUE(near("causal softmax", probs.data(), probsRef.data(), probs.size(), kHostRtol<T>));
  for (int64_t r = 0; r < probs.rows(); ++r)
    for (int64_t j = r % seq + 1; j < seq; ++j) ASSERT_TRUE(sameBits(probs(r, j), T(0))) << "row " << r << " col " << j;
  // Backward: dS = P (dP - rowsum(dP P)) scale, against the reference's expression on the same P.
  Mat<T> dp = randomMat<T>(probs.rows(), seq, 21);
  const Eigen::Matrix<T, Eigen::Dynamic, 1> rowDot = dp.cwiseProduct(probsRef).rowwise().sum();
  const Mat<T> want = (probsRef.array() * (dp.colwise() - rowDot).array() * scale).matrix();
  Mat<T> got = dp;
  hx.launch(got.rows(), SoftmaxBackward<T>{got.data(), probsRef.data(), seq, scale});
  EXPECT_TRUE(near("softmax backward", got.data(), want.data(), got.size(), kHostRtol<T>));
}

TYPED_TEST(HostKernels, LossBodies) {
  using T = TypeParam;
  HostExec hx;
  const int64_t n = 17, k = 11;
  Mat<T> x = randomMat<T>(n, k, 22, 4.0);
  std::vector<int> labels(n);
  for (int64_t r = 0; r < n; ++r) labels[static_cast<size_t>(r)] = static_cast<int>((r * 7) % k);
  {
    CrossEntropyLoss<T> loss(labels);
    Context<T> ctx;
    const T want = loss.forward(tensorOf(x), &ctx);
    Mat<T> probs(n, k), terms(n, 1), value(1, 1);
    hx.launch(n, CrossEntropyForwardRow<T>{probs.data(), terms.data(), x.data(), labels.data(), k});
    hx.launch(1, SumRows<T>{value.data(), terms.data(), n, static_cast<T>(n)});
    EXPECT_TRUE(near("cross-entropy loss", value.data(), &want, 1, kHostRtol<T>));
    EXPECT_TRUE(near("cross-entropy probs", probs.data(), ctx.tensors[0].data(), n * k, kHostRtol<T>));
    // From the reference's probabilities the gradient is the same arithmetic, bit for bit.
    Tensor<T> dref = loss.backward(ctx);
    Mat<T> dx(n, k);
    hx.launch(n * k,
              CrossEntropyBackward<T>{dx.data(), ctx.tensors[0].data(), labels.data(), k, T(1) / static_cast<T>(n)});
    EXPECT_TRUE(bitwiseEqual("cross-entropy dx", dx.data(), dref.data(), n * k));
  }
  {
    Mat<T> target = randomMat<T>(n, k, 23);
    MseLoss<T> loss(target);
    Context<T> ctx;
    const T want = loss.forward(tensorOf(x), &ctx);
    Mat<T> terms(n, 1), value(1, 1);
    hx.launch(n, MseForwardRow<T>{terms.data(), x.data(), target.data(), k});
    hx.launch(1, SumRows<T>{value.data(), terms.data(), n, static_cast<T>(n * k)});
    EXPECT_TRUE(near("mse loss", value.data(), &want, 1, kHostRtol<T>));
    Tensor<T> dref = loss.backward(ctx);
    Mat<T> dx(n, k);
    hx.launch(n * k, MseBackward<T>{dx.data(), x.data(), target.data(), T(2) / static_cast<T>(n * k)});
    EXPECT_TRUE(bitwiseEqual("mse dx", dx.data(), dref.data(), n * k));
  }
}

// CudaExec hands cuBLAS toColumnMajor(g). A column-major GEMM evaluated by BLAS's definition on those arguments
// must be hostGemm(g) bit for bit (same products, same summation order), for every transpose combination,
// padded leading dimensions, strided batches (the attention's per-head layout) and beta 0 / 1.
template <class T>
void blasReferenceGemm(const ColumnMajorGemm<T>& c) {
  for (int64_t bi = 0; bi < c.batch; ++bi) {
    const T* a = c.a + bi * c.strideA;
    const T* b = c.b + bi * c.strideB;
    T* out = c.c + bi * c.strideC;
    for (int64_t j = 0; j < c.n; ++j) {
      for (int64_t i = 0; i < c.m; ++i) {
        T acc = 0;
        for (int64_t p = 0; p < c.k; ++p) {
          const T av = c.transA ? a[p + i * c.lda] : a[i + p * c.lda];
          const T bv = c.transB ? b[j + p * c.ldb] : b[p + j * c.ldb];
          acc += av * bv;
        }
        T& o = out[i + j * c.ldc];
        o = c.beta == T(0) ? c.alpha * acc : c.alpha * acc + c.beta * o;
      }
    }
  }
}

TYPED_TEST(HostKernels, CublasArgumentMappingIsTheRowMajorProduct) {
  using T = TypeParam;
  const Mat<T> pool = randomMat<T>(1, 4096, 60);
  for (bool ta : {false, true}) {
    for (bool tb : {false, true}) {
      for (T beta : {T(0), T(1)}) {
        const int64_t m = 5, n = 7, k = 3, batch = 3, pad = 2;
        Gemm<T> g;
        g.transA = ta, g.transB = tb;
        g.m = m, g.n = n, g.k = k;
        g.lda = (ta ? m : k) + pad, g.ldb = (tb ? k : n) + pad, g.ldc = n + pad;
        g.strideA = (ta ? k : m) * g.lda, g.strideB = (tb ? n : k) * g.ldb, g.strideC = m * g.ldc;
        g.a = pool.data(), g.b = pool.data() + 1000, g.beta = beta, g.batch = batch;
        Mat<T> c1 = randomMat<T>(1, batch * g.strideC, 61), c2 = c1;
        g.c = c1.data();
        hostGemm(g);
        ColumnMajorGemm<T> cm = toColumnMajor(g);
        ASSERT_EQ(cublasArgumentError(cm), "");
        cm.c = c2.data();
        blasReferenceGemm(cm);
        EXPECT_TRUE(bitwiseEqual("gemm transA " + std::to_string(ta) + " transB " + std::to_string(tb), c1.data(),
                                 c2.data(), c1.size()));
      }
    }
  }
  // A leading dimension that does not cover the stored matrix is refused, as cuBLAS would refuse it.
  Gemm<T> bad;
  bad.m = 4, bad.n = 4, bad.k = 4, bad.lda = 4, bad.ldb = 3, bad.ldc = 4;
  EXPECT_NE(cublasArgumentError(toColumnMajor(bad)), "");
  HostExec hx;
  EXPECT_THROW(hx.gemm(bad), std::logic_error);
}

// ---------------------------------------------------------------------------------------------------------------
// Whole device ops (bodies + GEMM descriptions + allocation) on the host emulator against the reference ops:
// output, every context tensor (same count, shapes and bytes), the recorded draw, every input gradient and
// parameter gradient.

struct OpCase {
  const char* name;
  bool bitwise;  // every operation in the reference's order
  // Context tensors and buffers (by position) that are bitwise even when the rest is within kHostRtol: what
  // depends on a GEMM only through a decision (moe's routing) or not at all (moe's jitter multipliers).
  std::vector<size_t> exactContext = {};
  std::vector<size_t> exactState = {};
};

// The OpNode a block program states for one op (cases/op_node.h), which both the reference op and the device op
// are built from.
OpNode opNode(const std::string& name, const std::string& op, std::vector<int64_t> dims = {}, double p = 0) {
  OpNode n;
  n.name = name;
  n.op = op;
  n.dims = std::move(dims);
  n.p = p;
  return n;
}

OpNode rreluNode(double lower, double upper) {
  OpNode n = opNode("rrelu", "rrelu");
  n.lower = lower;
  n.upper = upper;
  return n;
}

// dims {experts, top_k, width, hidden}.
OpNode moeNode(std::vector<int64_t> dims, double jitter, double capacityFactor, double auxCoef) {
  OpNode n = opNode("moe", "moe", std::move(dims), jitter);
  n.capacityFactor = capacityFactor;
  n.auxCoef = auxCoef;
  return n;
}

// A block program's node and the reference op the op table builds from it, as reference/blocks.h makes one; the
// device op reads its attributes from the same OpNode.
template <class T>
Node<T> nodeOf(const OpNode& n) {
  return Node<T>{n.name, makeOp<T>(n, n.name), n.inputs, n};
}

// `numerics`: the env both ops run under (the reference's Context records it as its block runtime would; the
// device op records what its backward needs itself).
template <class T>
void checkDeviceOp(const OpCase& oc, const OpNode& spec, const std::vector<Mat<T>>& inputs, RngModel model,
                   const Numerics& numerics = {}) {
  SCOPED_TRACE(std::string(oc.name) + (model == RngModel::kCounter ? " (counter rng)" : " (stateful rng)"));
  HostExec hx;
  Node<T> node = nodeOf<T>(spec);
  std::vector<Shape> shapes;
  for (const auto& m : inputs) shapes.push_back({m.rows(), m.cols()});
  for (auto* p : node.op->params()) {  // away from identity, and non-zero starting gradients (they accumulate)
    p->value = randomMat<T>(p->value.rows(), p->value.cols(), 30, 0.5).array() + T(0.75);
    p->grad = randomMat<T>(p->value.rows(), p->value.cols(), 31);
  }
  const DNodeDesc<T> desc = describeNode(node, shapes);
  auto dop = makeDeviceOp<T>(hx, desc);
  for (size_t i = 0; i < node.op->params().size(); ++i) {  // describeNode uploaded the values; grads start equal
    auto* p = node.op->params()[i];
    hx.upload(dop->params()[i]->grad.data(), p->grad.data(), p->grad.size());
  }

  Rng refRng(model, 5), devRng(model, 5);
  refRng.reserve(1, 6);  // not at offset 0, and not on a multiple of 8
  devRng.reserve(1, 6);
  const uint64_t key = makeOpKey(1, 2, 3);
  NodeDraws refDraws(&refRng, key, nullptr, nullptr), devDraws(&devRng, key, nullptr, nullptr);
  const OpEnv env{&refDraws, numerics};
  const DEnv denv{&devDraws, numerics.erfGelu, numerics.bf16Matmul, numerics.bf16Inputs};

  ActivationMeter refMeter, devMeter;
  Context<T> ctx;
  ctx.numerics = numerics;
  Tensor<T> y;
  std::vector<Tensor<T>> in;
  for (const auto& m : inputs) in.push_back(Tensor<T>::from(m));
  {
    MeterScope s(&refMeter);
    y = node.op->forward(in, &ctx, env);
  }
  std::vector<DTensor<T>> din;
  for (const auto& m : inputs) din.push_back(uploadMatrix(hx, toHostMatrix("in", m)));
  DContext<T> dctx;
  DTensor<T> dy;
  {
    MeterScope s(&devMeter);
    dy = dop->forward(din, &dctx, denv);
  }
  EXPECT_EQ(devMeter.peak(), refMeter.peak()) << "activation bytes allocated by forward";
  EXPECT_EQ(devRng.state(), refRng.state()) << "generator after forward";
  EXPECT_EQ(dctx.draw, ctx.draw) << "recorded draw";
  if (node.op->kind() == "linear" || node.op->kind() == "attention" ||
      node.op->kind() == "moe") {  // the ops whose backward reads them
    EXPECT_EQ(dctx.bf16Inputs, numerics.bf16Inputs) << "the numerics the device context records";
  }
  auto check = [&](const std::string& what, const T* got, const T* want, int64_t n, bool exact = false) {
    if (oc.bitwise || exact) EXPECT_TRUE(bitwiseEqual(what, got, want, n));
    else EXPECT_TRUE(near(what, got, want, n, kHostRtol<T>));
  };
  auto listed = [](const std::vector<size_t>& list, size_t i) {
    return std::find(list.begin(), list.end(), i) != list.end();
  };
  ASSERT_TRUE(sameShape<T>("output", dy.rows(), dy.cols(), y.rows(), y.cols()));
  check("output", dy.data(), y.data(), y.size());
  ASSERT_EQ(dctx.tensors.size(), ctx.tensors.size()) << "context tensors";
  for (size_t t = 0; t < ctx.tensors.size(); ++t) {
    const std::string what = "context tensor " + std::to_string(t);
    ASSERT_TRUE(sameShape<T>(what, dctx.tensors[t].rows(), dctx.tensors[t].cols(), ctx.tensors[t].rows(),
                             ctx.tensors[t].cols()));
    check(what, dctx.tensors[t].data(), ctx.tensors[t].data(), ctx.tensors[t].size(), listed(oc.exactContext, t));
  }

  const Mat<T> dout = randomMat<T>(y.rows(), y.cols(), 32);
  std::vector<Tensor<T>> dinRef(inputs.size());
  std::vector<DTensor<T>> dinDev(inputs.size());
  {
    MeterScope s(&refMeter);
    node.op->backward(ctx, Tensor<T>::from(dout), dinRef);
  }
  {
    MeterScope s(&devMeter);
    const DTensor<T> doutDev =
        cloneActivation(hx, uploadMatrix(hx, toHostMatrix("dout", dout)));  // charged, as Tensor::from
    dop->backward(dctx, doutDev, dinDev);
  }
  EXPECT_EQ(devMeter.peak(), refMeter.peak()) << "activation bytes after backward";
  for (size_t i = 0; i < inputs.size(); ++i)
    check("input gradient " + std::to_string(i), dinDev[i].data(), dinRef[i].data(), dinRef[i].size());
  for (size_t i = 0; i < node.op->params().size(); ++i) {
    const auto* p = node.op->params()[i];
    check("grad " + p->name, dop->params()[i]->grad.data(), p->grad.data(), p->grad.size());
  }
  for (size_t i = 0; i < node.op->buffers().size(); ++i) {
    const auto* b = node.op->buffers()[i];
    check("state " + b->name, dop->buffers()[i]->value.data(), b->value.data(), b->value.size(),
          listed(oc.exactState, i));
  }
}

Numerics bf16Inputs() {
  Numerics n;
  n.bf16Inputs = true;
  return n;
}

// The ops DeviceOpsMatchReferenceOps compares on one rows x w input (add on two), one line an op or a setting of
// it; attention and moe, which need inputs of their own shape, have tests of their own below.
struct DeviceOpCase {
  OpCase check;
  OpNode node;
  bool twoInputs = false;
  Numerics numerics;
};

std::vector<DeviceOpCase> deviceOpCases(int64_t w) {
  auto one = [](OpCase check, OpNode node, bool twoInputs = false, Numerics numerics = {}) {
    return DeviceOpCase{check, std::move(node), twoInputs, numerics};
  };
  return {one({"relu", true}, opNode("relu", "relu")),
          one({"tanh", true}, opNode("tanh", "tanh")),
          one({"gelu", true}, opNode("gelu", "gelu")),
          one({"add", true}, opNode("add", "add"), true),
          one({"dropout", true}, opNode("dropout", "dropout", {}, 0.3)),
          one({"dropout p=0", true}, opNode("dropout", "dropout", {}, 0.0)),
          one({"linear", false}, opNode("fc", "linear", {w, 24})),
          one({"linear, bf16 inputs", false}, opNode("fc", "linear", {w, 24}), false, bf16Inputs()),
          one({"drop_path", true}, opNode("dp", "drop_path", {3}, 0.4)),  // 4 samples of 3 rows
          one({"drop_path, a row a sample", true}, opNode("dp", "drop_path", {1}, 0.5)),
          one({"rrelu", true}, rreluNode(0.125, 1.0 / 3.0)),
          one({"layernorm", false}, opNode("ln", "layernorm", {w})),
          one({"batchnorm", false}, opNode("bn", "batchnorm", {w}))};
}

TYPED_TEST(HostKernels, DeviceOpsMatchReferenceOps) {
  using T = TypeParam;
  const int64_t rows = 12, w = 16;
  const Mat<T> x = randomMat<T>(rows, w, 40, 2.0), x2 = randomMat<T>(rows, w, 41);
  for (RngModel model : {RngModel::kStateful, RngModel::kCounter})
    for (const DeviceOpCase& c : deviceOpCases(w))
      checkDeviceOp<T>(c.check, c.node, c.twoInputs ? std::vector<Mat<T>>{x, x2} : std::vector<Mat<T>>{x}, model,
                       c.numerics);
}

// Every op of the op table is compared with its reference here: a new op adds its line to deviceOpCases.
TEST(DeviceOps, everyOpOfTheTableIsComparedWithItsReference) {
  std::set<std::string> compared = {"attention", "moe"};  // DeviceAttentionMatchesReference, DeviceMoeMatchesReference
  for (const DeviceOpCase& c : deviceOpCases(16)) compared.insert(c.node.op);
  for (const std::string& kind : opKindNames())
    EXPECT_TRUE(compared.count(kind)) << "op '" << kind
                                      << "' has no line in deviceOpCases (tests/cuda_host_kernels_test.cpp)";
}

// Attention: outputs and gradients within tolerance, the dropout mask (context tensor 2) bit for bit.
TYPED_TEST(HostKernels, DeviceAttentionMatchesReference) {
  using T = TypeParam;
  const int64_t batch = 2, seq = 8, heads = 2, c = 12;
  const Mat<T> qkv = randomMat<T>(batch * seq, 3 * c, 42, 1.5);
  auto attention = [&](double p) { return opNode("attn", "attention", {heads, seq}, p); };
  for (RngModel model : {RngModel::kStateful, RngModel::kCounter}) {
    checkDeviceOp<T>({"attention", false}, attention(0.0), {qkv}, model);
    checkDeviceOp<T>({"attention dropout", false}, attention(0.25), {qkv}, model);
    // bf16 inputs: every product's operands rounded, P' after its dropout (with and without).
    checkDeviceOp<T>({"attention, bf16 inputs", false}, attention(0.0), {qkv}, model, bf16Inputs());
    checkDeviceOp<T>({"attention dropout, bf16 inputs", false}, attention(0.25), {qkv}, model, bf16Inputs());
  }
  // The mask bitwise, on its own.
  HostExec hx;
  Node<T> node = nodeOf<T>(attention(0.25));
  const std::vector<Shape> shapes{{qkv.rows(), qkv.cols()}};
  auto dop = makeDeviceOp<T>(hx, describeNode(node, shapes));
  Rng r1(RngModel::kStateful, 3), r2(RngModel::kStateful, 3);
  NodeDraws d1(&r1, 0, nullptr, nullptr), d2(&r2, 0, nullptr, nullptr);
  const OpEnv env{&d1, {}};
  const DEnv denv{&d2, false, false, false};
  Context<T> ctx;
  std::vector<Tensor<T>> in{Tensor<T>::from(qkv)};
  (void)node.op->forward(in, &ctx, env);
  DContext<T> dctx;
  std::vector<DTensor<T>> din{uploadMatrix(hx, toHostMatrix("qkv", qkv))};
  (void)dop->forward(din, &dctx, denv);
  EXPECT_TRUE(
      bitwiseEqual("attention dropout mask", dctx.tensors[2].data(), ctx.tensors[2].data(), ctx.tensors[2].size()));
}

// Mixture of experts (reference/ops/moe.h) as a whole device op: top-1 and top-2, a capacity that fits every
// assignment and one that drops some (capacity factor 0.5), router jitter (a random op: its multipliers, context
// tensor 8, bit for bit, and the recorded draw), bf16 inputs. The routing (token table 2, shares 4, expert_counts)
// is bitwise: it depends on the GEMMs only through decisions, which these inputs leave far from ties.
TYPED_TEST(HostKernels, DeviceMoeMatchesReference) {
  using T = TypeParam;
  const int64_t rows = 12, w = 16, h = 24;
  const Mat<T> x = randomMat<T>(rows, w, 43, 2.0);
  auto moe = [&](int experts, int topK, double cf, double jitter) {
    return moeNode({experts, topK, w, h}, jitter, cf, 0.25);
  };
  for (RngModel model : {RngModel::kStateful, RngModel::kCounter}) {
    checkDeviceOp<T>({"moe top-1", false, {2, 4}, {0}}, moe(4, 1, 1.25, 0.0), {x}, model);
    checkDeviceOp<T>({"moe top-2, capacity 0.5, jitter", false, {2, 4, 8}, {0}}, moe(4, 2, 0.5, 0.1), {x}, model);
    checkDeviceOp<T>({"moe top-2, 3 experts, capacity 2", false, {2, 4}, {0}}, moe(3, 2, 2.0, 0.0), {x}, model);
    checkDeviceOp<T>({"moe top-1, capacity 0.5, bf16 inputs", false, {2, 4}, {0}}, moe(4, 1, 0.5, 0.0), {x}, model,
                     bf16Inputs());
    checkDeviceOp<T>({"moe top-2, jitter, bf16 inputs", false, {2, 4, 8}, {0}}, moe(2, 2, 1.0, 0.3), {x}, model,
                     bf16Inputs());
  }
}

// The routing bodies against the CPU op, bit for bit: with dyadic inputs and weights every product before the
// GELU is exact, so logits, probabilities, choices (ties included: two experts with the same router row, and a
// zero row that ties all four), slots, gates, shares, the experts' pre-activations and activations and the
// token counts are the reference's bits, for top-1 and top-2 and capacities that drop assignments.
TYPED_TEST(HostKernels, MoeRoutingIsBitwiseTheReference) {
  using T = TypeParam;
  const int64_t rows = 10, w = 8, h = 12;
  Mat<T> x(rows, w);
  for (int64_t i = 0; i < x.size(); ++i) x.data()[i] = static_cast<T>((i * 7 % 5) - 2) * T(0.5);
  x.row(0).setZero();
  for (int topK : {1, 2}) {
    for (double cf : {0.5, 1.0, 4.0}) {
      SCOPED_TRACE("top-" + std::to_string(topK) + ", capacity factor " + std::to_string(cf));
      Node<T> node = nodeOf<T>(moeNode({4, topK, w, h}, 0.0, cf, 0.5));
      const auto ps = node.op->params();
      for (size_t q = 0; q < ps.size(); ++q) {
        Mat<T>& v = ps[q]->value;
        for (int64_t i = 0; i < v.rows(); ++i)
          for (int64_t j = 0; j < v.cols(); ++j) {
            const int64_t row = q == 0 && i == 1 ? 0 : i;  // router rows 0 and 1 alike: a tie wherever they lead
            v(i, j) = q == 1 ? T(0) : static_cast<T>(((row * 5 + j * 3 + static_cast<int64_t>(q)) % 5) - 2) * T(0.125);
          }
      }
      HostExec hx;
      const std::vector<Shape> shapes{{rows, w}};
      const DNodeDesc<T> desc = describeNode(node, shapes);
      auto dop = makeDeviceOp<T>(hx, desc);
      const OpEnv env{nullptr, {}};
      const DEnv denv{};
      Context<T> ctx;
      std::vector<Tensor<T>> in{Tensor<T>::from(x)};
      (void)node.op->forward(in, &ctx, env);
      DContext<T> dctx;
      std::vector<DTensor<T>> din{uploadMatrix(hx, toHostMatrix("x", x))};
      (void)dop->forward(din, &dctx, denv);
      ASSERT_EQ(dctx.tensors.size(), ctx.tensors.size());
      const char* names[] = {"x", "probs", "token", "gate", "frac", "z1", "act"};
      for (size_t t = 1; t < 7; ++t)
        EXPECT_TRUE(bitwiseEqual(names[t], dctx.tensors[t].data(), ctx.tensors[t].data(), ctx.tensors[t].size()));
      const auto* counts = node.op->buffers()[0];
      EXPECT_TRUE(bitwiseEqual("expert_counts", dop->buffers()[0]->value.data(), counts->value.data(), 4));
      // The ties went to the lower expert: row 0 (all four tied) took expert 0 first.
      EXPECT_EQ(ctx.tensors[2].map()(0, 0), T(0)) << "the zero row's first choice";
      if (cf < 1) {
        EXPECT_LT(counts->value.sum(), static_cast<T>(rows * topK)) << "no assignment was dropped";
      }
    }
  }
}

// The token stem (reference/ops/token_stem.h): the gather-and-add and the in-order scatter-add perform the
// reference's additions in its order, so both are bitwise, ids that repeat and a first row that is not a
// multiple of seq included.
TYPED_TEST(HostKernels, TokenStemBodiesAreBitwiseTheReference) {
  using T = TypeParam;
  HostExec hx;
  const int64_t vocab = 5, seq = 3, c = 7, rows = 11, first = 4;
  TokenStem<T> stem(vocab, seq, c);
  Param<T>& emb = *stem.params()[0];
  Param<T>& pos = *stem.params()[1];
  emb.value = randomMat<T>(vocab, c, 50);
  pos.value = randomMat<T>(seq, c, 51);
  emb.grad = randomMat<T>(vocab, c, 52);  // gradients accumulate onto what is there
  pos.grad = randomMat<T>(seq, c, 53);
  std::vector<int> ids(static_cast<size_t>(rows));
  for (int64_t r = 0; r < rows; ++r) ids[static_cast<size_t>(r)] = static_cast<int>((r * 3) % vocab);  // repeats
  Mat<T> out(rows, c);
  hx.launch(rows * c, TokenStemForward<T>{out.data(), emb.value.data(), pos.value.data(), ids.data(), first, seq, c});
  const Tensor<T> want = stem.forward(ids.data(), first, rows);
  EXPECT_TRUE(bitwiseEqual("stem x_0", out.data(), want.data(), rows * c));
  const Mat<T> g = randomMat<T>(rows, c, 54);
  Mat<T> dE = emb.grad, dP = pos.grad;
  hx.launch(c, TokenStemBackward<T>{dE.data(), dP.data(), g.data(), ids.data(), first, seq, rows, c});
  stem.backward(ids.data(), first, Tensor<T>::from(g));
  EXPECT_TRUE(bitwiseEqual("stem dE", dE.data(), emb.grad.data(), vocab * c));
  EXPECT_TRUE(bitwiseEqual("stem dP", dP.data(), pos.grad.data(), seq * c));
}

// The LM head (reference/ops/lm_head.h) as the device loss of kind kLmHead, against the reference head: loss,
// context tensors (count, shapes, and the bytes the planner charges), activation peak after forward and after
// backward, dL/dx_L and the parameter gradients; with and without dW, with one micro-batch and with two.
template <class T>
void checkLmHead(bool trainsWeight, int64_t divisor) {
  SCOPED_TRACE(std::string(trainsWeight ? "dW" : "no dW") + ", divisor " + std::to_string(divisor));
  HostExec hx;
  const int64_t n = 10, c = 12, v = 9;
  auto p = std::make_shared<LmHeadParams<T>>(v, c);
  p->lnWeight.value = randomMat<T>(1, c, 60, 0.5).array() + T(0.75);
  p->lnBias.value = randomMat<T>(1, c, 61, 0.2);
  p->weight.value = randomMat<T>(v, c, 62, 0.5);
  std::vector<Param<T>*> ps{&p->lnWeight, &p->lnBias, &p->weight};
  for (size_t k = 0; k < ps.size(); ++k) ps[k]->grad = randomMat<T>(ps[k]->grad.rows(), ps[k]->grad.cols(), 63 + k);
  std::vector<int> labels(static_cast<size_t>(n));
  for (int64_t r = 0; r < n; ++r) labels[static_cast<size_t>(r)] = static_cast<int>((r * 5) % v);
  LmHeadLoss<T> ref(p, labels, trainsWeight, divisor);

  DHeadDesc<T> hd;
  hd.lnWeight = toHostMatrix(p->lnWeight.name, p->lnWeight.value);
  hd.lnBias = toHostMatrix(p->lnBias.name, p->lnBias.value);
  hd.weight = toHostMatrix(p->weight.name, p->weight.value);
  hd.trainsWeight = trainsWeight;
  DLmHead<T> head = makeLmHead(hx, hd);
  for (size_t k = 0; k < ps.size(); ++k)
    hx.upload(head.params()[k]->grad.data(), ps[k]->grad.data(), ps[k]->grad.size());
  DLossDesc<T> ld;
  ld.kind = DLossKind::kLmHead;
  ld.labels = labels;
  ld.divisor = divisor;
  DLoss<T, HostExec> dev(hx, ld, n, c, &head);

  const Mat<T> x = randomMat<T>(n, c, 66, 2.0);
  ActivationMeter refMeter, devMeter;
  Context<T> ctx;
  DContext<T> dctx;
  Tensor<T> xr;
  DTensor<T> xd;
  T want = 0;
  {
    MeterScope s(&refMeter);
    xr = Tensor<T>::from(x);
    want = ref.forward(xr, &ctx);
  }
  {
    MeterScope s(&devMeter);
    xd = cloneActivation(hx, uploadMatrix(hx, toHostMatrix("x", x)));
    dev.forward(xd, &dctx);
  }
  EXPECT_TRUE(near("lm head loss", dev.value().data(), &want, 1, kHostRtol<T>));
  EXPECT_EQ(devMeter.peak(), refMeter.peak()) << "activation bytes after forward";
  ASSERT_EQ(dctx.tensors.size(), ctx.tensors.size()) << "context tensors";
  int64_t extra = 0;
  for (size_t t = 0; t < ctx.tensors.size(); ++t) {
    ASSERT_TRUE(sameShape<T>("context tensor " + std::to_string(t), dctx.tensors[t].rows(), dctx.tensors[t].cols(),
                             ctx.tensors[t].rows(), ctx.tensors[t].cols()));
    EXPECT_TRUE(near("context tensor " + std::to_string(t), dctx.tensors[t].data(), ctx.tensors[t].data(),
                     ctx.tensors[t].size(), kHostRtol<T>));
    if (t > 0) extra += dctx.tensors[t].bytes();
  }
  EXPECT_EQ(dctx.tensors[0].storageId(), xd.storageId()) << "x_L is saved, not copied";
  EXPECT_EQ(extra, ref.meta({n, c}).contextExtraBytes) << "the context bytes the planner charges";
  Tensor<T> dref;
  DTensor<T> ddev;
  {
    MeterScope s(&refMeter);
    dref = ref.backward(ctx);
  }
  {
    MeterScope s(&devMeter);
    ddev = dev.backward(dctx);
  }
  EXPECT_EQ(devMeter.peak(), refMeter.peak()) << "activation bytes after backward";
  EXPECT_TRUE(near("lm head dx", ddev.data(), dref.data(), n * c, kHostRtol<T>));
  const double floor = std::max(p->lnWeight.grad.cwiseAbs().maxCoeff(), p->weight.grad.cwiseAbs().maxCoeff());
  for (size_t k = 0; k < ps.size(); ++k)
    EXPECT_TRUE(near("grad " + ps[k]->name, head.params()[k]->grad.data(), ps[k]->grad.data(), ps[k]->grad.size(),
                     kHostRtol<T>, floor));
  if (!trainsWeight) {  // no dW: the gradient is the one it started with, bit for bit
    const Mat<T> start = randomMat<T>(v, c, 65);
    EXPECT_TRUE(bitwiseEqual("untrained head.weight grad", head.weight.grad.data(), start.data(), v * c));
  }
}

TYPED_TEST(HostKernels, LmHeadMatchesTheReferenceHead) {
  for (bool trainsWeight : {true, false})
    for (int64_t divisor : {1, 2}) checkLmHead<TypeParam>(trainsWeight, divisor);
}

// The device op table and the reference op table name the same ops, in the same order, so every op a block
// program can hold runs on the device (a new op adds a line to both).
TYPED_TEST(HostKernels, everyReferenceOpHasADeviceOp) {
  using T = TypeParam;
  std::vector<std::string> device;
  for (const auto& e : deviceOps<T, HostExec>()) device.push_back(e.kind);
  EXPECT_EQ(device, opKindNames());
  HostExec hx;
  DNodeDesc<T> d;
  d.node.op = "no-such-op";
  try {
    makeDeviceOp<T>(hx, d);
    ADD_FAILURE() << "an unknown op kind made a device op";
  } catch (const std::invalid_argument& e) {
    EXPECT_STREQ(e.what(), "device backend: no device op for reference op kind 'no-such-op'");
  }
}

}  // namespace
}  // namespace ckpt::gpu::test
