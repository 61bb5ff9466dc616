// Bitwise comparison: bit patterns, not ==, so -0.0 and NaN payloads count; ULP distances on the signed-magnitude
// line; one report per differing tensor with the first index, both values and the count.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>

#include "harness/compare.h"

namespace ckpt {
namespace {

template <class T>
StepResult<T> result(std::vector<T> grad) {
  StepResult<T> r;
  r.loss = T(1.5);
  Mat<T> g(1, static_cast<int64_t>(grad.size()));
  for (size_t i = 0; i < grad.size(); ++i) g(0, static_cast<int64_t>(i)) = grad[i];
  r.grads = {{"b0.fc.weight", g}};
  r.inputGrad = Mat<T>::Zero(2, 2);
  r.state = {{"b0.bn.running_mean", Mat<T>::Ones(1, 2)}};
  r.rng = {7, 16};
  return r;
}

float floatFromBits(uint32_t u) {
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

TEST(Compare, identicalRunsAreBitwiseEqual) {
  const auto a = result<double>({1, 2, 3});
  const Comparison c = compareSteps<double>({a, a}, {a, a});
  EXPECT_TRUE(c.bitwiseEqual);
  EXPECT_TRUE(c.differences.empty());
}

TEST(Compare, negativeZeroDiffersFromZeroAtZeroUlp) {
  const Comparison c = compareSteps<float>({result<float>({0.0f, 1.0f})}, {result<float>({-0.0f, 1.0f})});
  ASSERT_FALSE(c.bitwiseEqual);
  ASSERT_EQ(c.differences.size(), 1u);
  const Difference& d = c.differences[0];
  EXPECT_EQ(d.step, 0);
  EXPECT_EQ(d.tensor, "grad b0.fc.weight");
  EXPECT_EQ(d.firstIndex, 0);
  EXPECT_EQ(d.expected, "0");
  EXPECT_EQ(d.actual, "-0");
  EXPECT_EQ(d.actualBits, 0x80000000u);
  EXPECT_EQ(d.ulpDistance, 0u);
  EXPECT_EQ(d.count, 1);
}

TEST(Compare, nanPayloadsDiffer) {
  const float q1 = floatFromBits(0x7fc00001u), q2 = floatFromBits(0x7fc00002u);
  const Comparison c = compareSteps<float>({result<float>({q1})}, {result<float>({q2})});
  ASSERT_EQ(c.differences.size(), 1u);
  EXPECT_EQ(c.differences[0].expectedBits, 0x7fc00001u);
  EXPECT_EQ(c.differences[0].ulpDistance, 1u);
  const Comparison same = compareSteps<float>({result<float>({q1})}, {result<float>({q1})});
  EXPECT_TRUE(same.bitwiseEqual);
}

TEST(Compare, reportsFirstIndexCountValuesAndUlps) {
  const double x = 0.1;
  const double next = std::nextafter(x, 1.0);
  const double far = std::nextafter(std::nextafter(std::nextafter(x, 1.0), 1.0), 1.0);
  const Comparison c = compareSteps<double>({result<double>({1, x, 2, x})}, {result<double>({1, next, 2, far})});
  ASSERT_EQ(c.differences.size(), 1u);
  const Difference& d = c.differences[0];
  EXPECT_EQ(d.firstIndex, 1);
  EXPECT_EQ(d.count, 2);
  EXPECT_EQ(d.expected, "0.1");
  EXPECT_EQ(d.actual, "0.10000000000000002");
  EXPECT_EQ(d.ulpDistance, 1u);
}

TEST(Compare, ulpDistanceCrossesZero) {
  const float tiny = std::numeric_limits<float>::denorm_min();
  const Comparison c = compareSteps<float>({result<float>({tiny})}, {result<float>({-tiny})});
  ASSERT_EQ(c.differences.size(), 1u);
  EXPECT_EQ(c.differences[0].ulpDistance, 2u);
}

TEST(Compare, everyPartOfTheStepIsCompared) {
  auto a = result<double>({1});
  auto b = a;
  b.loss = 1.25;
  b.inputGrad(1, 0) = 3;
  b.state[0].value(0, 1) = 2;
  b.rng.offset = 20;
  const Comparison c = compareSteps<double>({a, a}, {a, b});
  ASSERT_EQ(c.differences.size(), 4u);
  EXPECT_EQ(c.differences[0].step, 1);
  EXPECT_EQ(c.differences[0].tensor, "loss");
  EXPECT_EQ(c.differences[1].tensor, "input_grad");
  EXPECT_EQ(c.differences[1].firstIndex, 2);
  EXPECT_EQ(c.differences[2].tensor, "state b0.bn.running_mean");
  EXPECT_EQ(c.differences[3].tensor, "rng.offset");
  EXPECT_EQ(c.differences[3].ulpDistance, 4u);
}

TEST(Compare, aMissingTensorIsAShapeDifference) {
  auto a = result<float>({1});
  auto b = a;
  b.inputGrad = Mat<float>();
  const Comparison c = compareSteps<float>({a}, {b});
  ASSERT_EQ(c.differences.size(), 1u);
  EXPECT_EQ(c.differences[0].shape, "(2, 2) vs (0, 0)");
  EXPECT_EQ(c.differences[0].count, 4);
}

TEST(Compare, jsonCarriesEveryField) {
  const Comparison c = compareSteps<float>({result<float>({1.0f})}, {result<float>({2.0f})});
  const auto j = toJson(c);
  EXPECT_EQ(j["bitwise_equal"], false);
  const auto& d = j["differences"][0];
  EXPECT_EQ(d["step"], 0);
  EXPECT_EQ(d["tensor"], "grad b0.fc.weight");
  EXPECT_EQ(d["first_index"], 0);
  EXPECT_EQ(d["expected"], "1");
  EXPECT_EQ(d["actual"], "2");
  EXPECT_EQ(d["expected_bits"], "0x3f800000");
  EXPECT_EQ(d["actual_bits"], "0x40000000");
  EXPECT_EQ(d["ulp_distance"], 0x800000);
  EXPECT_EQ(d["count"], 1);
  EXPECT_EQ(
      toText(c.differences[0]),
      "step 0 grad b0.fc.weight: 1 element(s) differ; first at [0]: 1 (0x3f800000) vs 2 (0x40000000), 8388608 ulp");
}

TEST(Compare, flatArraysReportCountFirstAndLargestUlp) {
  const float a[] = {1.0f, 2.0f, 3.0f, 4.0f};
  float b[] = {1.0f, 2.0f, 3.0f, 4.0f};
  EXPECT_FALSE(compareFlat(0, "grad w", a, b, 4));
  b[1] = std::nextafter(2.0f, 3.0f);
  b[3] = std::nextafter(std::nextafter(std::nextafter(4.0f, 0.0f), 0.0f), 0.0f);
  const auto d = compareFlat(2, "grad w", a, b, 4);
  ASSERT_TRUE(d);
  EXPECT_EQ(d->step, 2);
  EXPECT_EQ(d->count, 2);
  EXPECT_EQ(d->firstIndex, 1);
  EXPECT_EQ(d->ulpDistance, 1u);
  EXPECT_EQ(d->maxUlpDistance, 3u);
  const int64_t x[] = {5, -3}, y[] = {6, -3};
  const auto e = compareFlat(0, "buffer n", x, y, 2);
  ASSERT_TRUE(e);
  EXPECT_EQ(e->maxUlpDistance, 1u);
  EXPECT_EQ(e->actual, "6");
}

// Two diverged runs are equal bit for bit (the same NaNs), so a run with a non-finite value is not judged: the one
// line names the step, the tensor, the value and how many elements.
TEST(Compare, nonFiniteNamesStepTensorValueAndCount) {
  const float nan = std::numeric_limits<float>::quiet_NaN(), inf = std::numeric_limits<float>::infinity();
  const float ok[] = {1, 2, 3}, one[] = {1, -inf, nan, 4};
  EXPECT_EQ(nonFinite(0, "grad w", ok, 3), std::nullopt);
  EXPECT_EQ(nonFinite(2, "grad w", one, 4), "step 2 grad w: 2 of 4 elements are not finite, the first -inf at index 1");
  EXPECT_EQ(nonFinite(1, "loss", &nan, 1), "step 1 loss: NaN");
  const double big = std::numeric_limits<double>::infinity();
  EXPECT_EQ(nonFinite(0, "loss", &big, 1), "step 0 loss: +inf");
  EXPECT_EQ(nonFinite(0, "loss", &ok[0], 0), std::nullopt);
}

TEST(Compare, firstNonFiniteTakesStepsInOrderAndEveryPart) {
  const auto fine = result<double>({1, 2, 3});
  EXPECT_EQ(firstNonFinite<double>({fine, fine}), std::nullopt);
  auto grad = result<double>({1, std::nan(""), 3});
  auto loss = fine;
  loss.loss = std::numeric_limits<double>::infinity();
  EXPECT_EQ(firstNonFinite<double>({fine, grad, loss}),
            "step 1 grad b0.fc.weight: 1 of 3 elements are not finite, the first NaN at index 1");
  EXPECT_EQ(firstNonFinite<double>({fine, loss, grad}), "step 1 loss: +inf");
  auto input = fine;
  input.inputGrad(1, 0) = -std::numeric_limits<double>::infinity();
  EXPECT_EQ(firstNonFinite<double>({input}),
            "step 0 input_grad: 1 of 4 elements are not finite, the first -inf at index 2");
  auto state = fine;
  state.state[0].value(0, 1) = std::nan("");
  EXPECT_EQ(firstNonFinite<double>({state}),
            "step 0 state b0.bn.running_mean: 1 of 2 elements are not finite, the first NaN at index 1");
}

}  // namespace
}  // namespace ckpt
