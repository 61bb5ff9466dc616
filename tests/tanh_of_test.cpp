// The reference's float tanh (reference/tanh_of.h) against the exact value (glibc's double tanh, rounded
// nowhere): within its documented 1.14 ulp over a sweep of every float's bit pattern, densely where its two forms
// meet; odd, never decreasing, right at the special values; and the vectorised loops of the Tanh and GELU ops give
// exactly what one scalar call gives, at every position of every length (so no element depends on whether it
// fell in a vector or in the scalar tail).
#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>
#include <vector>

#include "reference/ops/gelu.h"
#include "reference/ops/tanh.h"
#include "reference/tanh_of.h"

namespace ckpt {
namespace {

constexpr double kMaxUlp = 1.14;  // an exhaustive run over all 2^31 non-negative floats measured 1.134 (x = 0.8674780)

// |got - tanh(x)| in units of the last place of tanh(x) rounded to float (below 1.0 where it rounds to 1).
double ulpError(float x, float got) {
  const double exact = std::tanh(static_cast<double>(x));
  const float rounded = std::fabs(static_cast<float>(exact));
  const double ulp = rounded >= 1.0f ? 1.0 - static_cast<double>(std::nextafter(1.0f, 0.0f))
                                     : static_cast<double>(std::nextafter(rounded, 2.0f)) - rounded;
  return std::fabs(static_cast<double>(got) - exact) / ulp;
}

// Every `stride`-th float from `lo` up to `hi` (bit patterns of non-negative floats): accuracy, oddness and order.
void sweep(uint32_t lo, uint32_t hi, uint32_t stride) {
  float previous = tanhOfFloat(std::bit_cast<float>(lo));
  double worst = 0;
  float worstAt = 0;
  for (uint64_t u = lo; u < hi; u += stride) {
    const float x = std::bit_cast<float>(static_cast<uint32_t>(u));
    const float t = tanhOfFloat(x);
    const double e = ulpError(x, t);
    if (e > worst) {
      worst = e;
      worstAt = x;
    }
    ASSERT_EQ(std::bit_cast<uint32_t>(tanhOfFloat(-x)), std::bit_cast<uint32_t>(-t)) << "not odd at " << x;
    ASSERT_GE(t, previous) << "decreases at " << x;
    previous = t;
  }
  EXPECT_LE(worst, kMaxUlp) << "worst error " << worst << " ulp at x = " << worstAt;
}

TEST(TanhOf, WithinItsUlpBoundOverTheFloats) { sweep(0, 0x7f800000u, 61); }

TEST(TanhOf, EveryFloatWhereTheTwoFormsMeet) {
  sweep(std::bit_cast<uint32_t>(0.70f), std::bit_cast<uint32_t>(0.90f), 1);
}

TEST(TanhOf, SpecialValues) {
  EXPECT_EQ(std::bit_cast<uint32_t>(tanhOfFloat(0.0f)), std::bit_cast<uint32_t>(0.0f));
  EXPECT_EQ(std::bit_cast<uint32_t>(tanhOfFloat(-0.0f)), std::bit_cast<uint32_t>(-0.0f));
  EXPECT_EQ(tanhOfFloat(std::numeric_limits<float>::infinity()), 1.0f);
  EXPECT_EQ(tanhOfFloat(-std::numeric_limits<float>::infinity()), -1.0f);
  EXPECT_EQ(tanhOfFloat(20.0f), 1.0f);
  EXPECT_TRUE(std::isnan(tanhOfFloat(std::numeric_limits<float>::quiet_NaN())));
  const float tiny = std::numeric_limits<float>::denorm_min();
  EXPECT_EQ(tanhOfFloat(tiny), tiny);
}

template <class MakeOp, class Scalar>
void expectLoopEqualsScalar(MakeOp makeOp, Scalar scalar) {
  for (int64_t n = 1; n <= 70; ++n) {
    auto x = Tensor<float>::empty(1, n);
    for (int64_t i = 0; i < n; ++i) x.data()[i] = -6.0f + 0.173f * static_cast<float>(i * 7 % 71);
    auto op = makeOp();
    const Tensor<float> in[] = {x};
    const Tensor<float> y = op.forward(in, nullptr, OpEnv{});
    for (int64_t i = 0; i < n; ++i)
      ASSERT_EQ(std::bit_cast<uint32_t>(y.data()[i]), std::bit_cast<uint32_t>(scalar(x.data()[i])))
          << "length " << n << ", element " << i;
  }
}

TEST(TanhOf, OpLoopsEqualOneScalarCallAtEveryPosition) {
  expectLoopEqualsScalar([] { return Tanh<float>(); }, [](float v) { return tanhOfFloat(v); });
  const float beta = static_cast<float>(std::numbers::sqrt2 * std::numbers::inv_sqrtpi);
  const float kappa = 0.044715f;
  expectLoopEqualsScalar([] { return Gelu<float>(); },
                         [&](float v) { return 0.5f * v * (1.0f + tanhOfFloat(beta * (v + kappa * (v * v * v)))); });
}

}  // namespace
}  // namespace ckpt
