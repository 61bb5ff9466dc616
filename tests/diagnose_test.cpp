// The finding classifier (harness/diagnose.h) on hand-made evidence: each class from the tensors that define
// it, the order in which classes win, and the near misses that must fall through to "semantic".
#include "harness/diagnose.h"
#include "harness/diagnose_steps.h"

#include <gtest/gtest.h>

#include <cmath>

namespace ckpt {
namespace {

TensorEvidence tensor(TensorKind kind, std::vector<double> plain, std::vector<double> other, uint64_t maxUlp = 0) {
  TensorEvidence t;
  t.name = "t";
  t.kind = kind;
  t.plain = std::move(plain);
  t.other = std::move(other);
  t.maxUlp = maxUlp;
  return t;
}

// A running mean moved from `before` by momentum m towards x, once (plain) and twice (other).
TensorEvidence runningStat(double m, std::vector<double> before, std::vector<double> x, bool momentumKnown) {
  TensorEvidence t = tensor(TensorKind::kState, {}, {});
  t.name = "layer1.0.bn1.running_mean";
  for (size_t i = 0; i < before.size(); ++i) {
    const float once = static_cast<float>((1 - m) * before[i] + m * x[i]);
    t.plain.push_back(once);
    t.other.push_back(static_cast<float>((1 - m) * once + m * x[i]));
  }
  t.before = before;
  if (momentumKnown) t.momentum = m;
  t.maxUlp = 100000;
  return t;
}

TEST(Diagnose, absentGradientIsMissingGradient) {
  TensorEvidence g = tensor(TensorKind::kGradient, {0.5, -1.0}, {});
  g.otherPresent = false;
  const Diagnosis d = diagnose({g}, 64);
  EXPECT_EQ(d.cls, FindingClass::kMissingGradient);
  EXPECT_NE(d.why.find("absent"), std::string::npos);
}

// verify's input-grad-dropped shrinks to a ReLU that lets nothing through: the plain input gradient is all zero,
// and the checkpointed run never wrote one. Absent is missing whatever the plain value.
TEST(Diagnose, absentGradientIsMissingEvenWherePlainIsZero) {
  TensorEvidence g = tensor(TensorKind::kGradient, {0.0, 0.0}, {});
  g.otherPresent = false;
  EXPECT_EQ(diagnose({g}, 64).cls, FindingClass::kMissingGradient);
}

TEST(Diagnose, zeroGradientWherePlainHasOneIsMissingGradient) {
  EXPECT_EQ(diagnose({tensor(TensorKind::kGradient, {0.5, -1.0}, {0.0, 0.0}, 1u << 30)}, 64).cls,
            FindingClass::kMissingGradient);
  // Both zero is no missing gradient (nor a difference at all): falls through.
  EXPECT_NE(diagnose({tensor(TensorKind::kGradient, {0.0, 0.0}, {0.0, -0.0}, 1u << 31)}, 64).cls,
            FindingClass::kMissingGradient);
}

// A bias before BatchNorm has gradient zero in exact arithmetic: rounding noise in the plain run, exactly zero
// in the checkpointed one, next to a gradient off by a few ULP. Rounding, not a missing gradient.
TEST(Diagnose, exactlyZeroGradientBesideNoiseIsRoundingLevel) {
  TensorEvidence bias = tensor(TensorKind::kGradient, {1e-17, -2e-17}, {0.0, 0.0});
  bias.digits = 53;
  TensorEvidence w = tensor(TensorKind::kGradient, {0.5, 0.25}, {0.5 + std::ldexp(1.0, -52), 0.25});
  w.digits = 53;
  EXPECT_EQ(diagnose({bias, w}, 64).cls, FindingClass::kRoundingLevel);
  // A gradient above that noise that vanishes is still missing.
  TensorEvidence big = tensor(TensorKind::kGradient, {1e-3, 0.0}, {0.0, 0.0});
  big.digits = 53;
  EXPECT_EQ(diagnose({big, w}, 64).cls, FindingClass::kMissingGradient);
}

TEST(Diagnose, differentDropoutZeroPatternIsRngDesync) {
  TensorEvidence mask = tensor(TensorKind::kMask, {1, 0, 0, 1}, {0, 0, 1, 1});
  const Diagnosis d = diagnose({tensor(TensorKind::kGradient, {1.0}, {2.0}, 1u << 23), mask}, 64);
  EXPECT_EQ(d.cls, FindingClass::kRngDesync);
  EXPECT_NE(d.why.find("2 element(s)"), std::string::npos);
}

TEST(Diagnose, generatorStateAloneIsRngDesync) {
  EXPECT_EQ(diagnose({tensor(TensorKind::kRng, {1, 2, 3}, {1, 2, 4}, 1)}, 64).cls, FindingClass::kRngDesync);
}

TEST(Diagnose, secondMomentumUpdateIsStateUpdatedTwice) {
  for (bool known : {true, false}) {
    const TensorEvidence t = runningStat(0.1, {0.0, 0.5, -2.0}, {1.25, -0.75, 3.0}, known);
    EXPECT_EQ(furtherUpdates(t), 1) << "momentum known: " << known;
    EXPECT_EQ(diagnose({t}, 64).cls, FindingClass::kStateUpdatedTwice);
  }
}

TEST(Diagnose, counterIncrementedTwiceIsStateUpdatedTwice) {
  TensorEvidence c = tensor(TensorKind::kState, {1}, {2}, 1);
  c.floating = false;
  c.before = {0};
  EXPECT_EQ(furtherUpdates(c), 1);
  c.other = {3};  // a block recomputed twice (recursive): two increments more
  EXPECT_EQ(furtherUpdates(c), 2);
  EXPECT_EQ(diagnose({c}, 64).cls, FindingClass::kStateUpdatedTwice);
  c.other = {2.5};  // not a whole number of increments
  EXPECT_EQ(furtherUpdates(c), 0);
}

// An MoE block's tokens-per-expert count (torchtitan PR 1593): the forward adds each expert's count, which differ,
// and a full recompute adds them again (37 -> 74 where plain has 37). Int64 or float32 alike; any element off the
// line, or a count that moved where plain's did not, is no second addition.
TEST(Diagnose, countsAddedAgainByTheRecomputeAreStateUpdatedTwice) {
  for (bool floating : {false, true}) {
    TensorEvidence c = tensor(TensorKind::kState, {37, 5, 0, 22}, {74, 10, 0, 44}, 1);
    c.name = "layers.0.moe.tokens_per_expert";
    c.floating = floating;
    c.before = {0, 0, 0, 0};
    EXPECT_EQ(furtherUpdates(c), 1) << "floating " << floating;
    const Diagnosis d = diagnose({c}, 64);
    EXPECT_EQ(d.cls, FindingClass::kStateUpdatedTwice) << d.why;
    c.before = {10, 1, 3, 2};  // a count kept across steps: the step added 27, 4, -3, 20
    c.plain = {37, 5, 0, 22};
    c.other = {64, 9, -3, 42};
    EXPECT_EQ(furtherUpdates(c), 1);
    c.other = {91, 13, -6, 62};  // recomputed twice
    EXPECT_EQ(furtherUpdates(c), 2);
    c.other[1] += 1;  // one count off the line
    EXPECT_EQ(furtherUpdates(c), 0);
    EXPECT_EQ(diagnose({c}, 64).cls, FindingClass::kSemantic);
    c.other = {64, 9, 1, 42};  // an element that plain left alone moved
    c.before = {10, 1, 0, 2};
    c.plain = {37, 5, 0, 22};
    EXPECT_EQ(furtherUpdates(c), 0);
  }
}

// A count the step clears after its forward (a forward hook's update, torchtitan issue 1117), which the recompute
// adds into again: plain ends at zero, so no further update of its plain value explains it. Semantic, saying that
// only buffers differ.
TEST(Diagnose, bufferClearedThenAddedAgainIsSemanticNamingOnlyBuffers) {
  TensorEvidence c = tensor(TensorKind::kState, {0, 0, 0, 0}, {10, 21, 18, 15}, 1);
  c.name = "blocks.0.tokens_per_expert";
  c.before = {0, 0, 0, 0};
  EXPECT_EQ(furtherUpdates(c), 0);
  const Diagnosis d = diagnose({c}, 64);
  EXPECT_EQ(d.cls, FindingClass::kSemantic);
  EXPECT_NE(d.why.find("only buffers differ"), std::string::npos) << d.why;
  EXPECT_NE(d.why.find("blocks.0.tokens_per_expert"), std::string::npos) << d.why;
  TensorEvidence g = tensor(TensorKind::kGradient, {1, 2}, {1, 3}, 1);
  g.name = "blocks.0.router.weight";
  EXPECT_EQ(diagnose({c, g}, 64).why.find("only buffers differ"), std::string::npos);
}

// verify's state-updated-twice under recursive: a residual-bn block recomputed twice moves its running statistics
// two momentum updates past the plain run's (r0 = 1, batch variance 0: 0.9 plain, 0.729 = 0.9^3 checkpointed).
TEST(Diagnose, runningStatUpdatedTwiceMoreIsStateUpdatedTwice) {
  TensorEvidence t = tensor(TensorKind::kState, {0.9, 0.9}, {0.9 * 0.9 * 0.9, 0.9 * 0.9 * 0.9}, 1);
  t.before = {1.0, 1.0};
  t.momentum = 0.1;
  EXPECT_EQ(furtherUpdates(t), 2);
  const Diagnosis d = diagnose({t}, 64);
  EXPECT_EQ(d.cls, FindingClass::kStateUpdatedTwice);
  EXPECT_NE(d.why.find("2 more updates"), std::string::npos) << d.why;
  t.momentum.reset();  // without the momentum, only one further update can be told from another ratio
  EXPECT_EQ(furtherUpdates(t), 0);
}

TEST(Diagnose, aStateChangeThatIsNoSecondUpdateIsSemantic) {
  TensorEvidence t = runningStat(0.1, {0.0, 0.5, -2.0}, {1.25, -0.75, 3.0}, true);
  t.other[1] += 0.01;  // one element off the second-update line
  EXPECT_EQ(furtherUpdates(t), 0);
  EXPECT_EQ(diagnose({t}, 64).cls, FindingClass::kSemantic);
  // Without the value before the step nothing can be said.
  TensorEvidence u = runningStat(0.1, {0.0, 0.5}, {1.0, 1.0}, true);
  u.before.clear();
  EXPECT_EQ(furtherUpdates(u), 0);
}

TEST(Diagnose, stateTwiceNeedsEveryDifferenceToBeState) {
  const TensorEvidence t = runningStat(0.1, {0.0, 0.5}, {1.0, 1.0}, true);
  EXPECT_EQ(diagnose({t, tensor(TensorKind::kGradient, {1.0}, {1.5}, 1u << 22)}, 64).cls, FindingClass::kSemantic);
}

TEST(Diagnose, smallUlpOfTheScaleEverywhereIsRoundingLevelUpToN) {
  const double u = std::ldexp(1.0, -23);  // float32's ULP at 1.0
  const std::vector<TensorEvidence> ts = {tensor(TensorKind::kGradient, {1.0, -0.5}, {1.0 + 3 * u, -0.5}),
                                          tensor(TensorKind::kLoss, {2.0}, {2.0 + 2 * 12 * u})};  // ULP at 2 is 2u
  EXPECT_DOUBLE_EQ(scaledUlp(ts[0]), 3.0);
  EXPECT_DOUBLE_EQ(scaledUlp(ts[1]), 12.0);
  const Diagnosis d = diagnose(ts, 12);
  EXPECT_EQ(d.cls, FindingClass::kRoundingLevel);
  EXPECT_DOUBLE_EQ(d.worstScaledUlp, 12.0);
  EXPECT_EQ(diagnose(ts, 11).cls, FindingClass::kSemantic);
}

TEST(Diagnose, anElementNearZeroIsMeasuredAtItsTensorsScale) {
  // 1e-8 vs 1.1e-8 is ~10^6 of its own float32 ULPs, but 0.008 ULP of the tensor's largest value 1.0: the
  // cancellation of a reordered sum, not a semantic change.
  const TensorEvidence t = tensor(TensorKind::kGradient, {1.0, 1e-8}, {1.0, 1.1e-8}, 1000000);
  EXPECT_LT(scaledUlp(t), 0.01);
  EXPECT_EQ(diagnose({t}, 1).cls, FindingClass::kRoundingLevel);
  TensorEvidence d = t;
  d.digits = 53;  // the same values in float64 are 2^29 times more ULPs apart
  EXPECT_EQ(diagnose({d}, 64).cls, FindingClass::kSemantic);
}

TEST(Diagnose, nanOrAZeroScaleIsNeverRounding) {
  EXPECT_TRUE(std::isinf(scaledUlp(tensor(TensorKind::kGradient, {0.0, 0.0}, {0.0, 1e-30}))));
  EXPECT_TRUE(std::isinf(scaledUlp(tensor(TensorKind::kLoss, {1.0}, {std::nan("")}))));
  EXPECT_EQ(scaledUlp(tensor(TensorKind::kLoss, {std::nan("")}, {std::nan("")})), 0.0);
}

TEST(Diagnose, missingGradientWinsOverRoundingAndRng) {
  TensorEvidence g = tensor(TensorKind::kGradient, {0.5}, {});
  g.otherPresent = false;
  EXPECT_EQ(diagnose({tensor(TensorKind::kRng, {1}, {2}, 1), g}, 64).cls, FindingClass::kMissingGradient);
}

TEST(Diagnose, classNamesAreStable) {
  EXPECT_STREQ(findingClassName(FindingClass::kMissingGradient), "missing-gradient");
  EXPECT_STREQ(findingClassName(FindingClass::kRngDesync), "rng-desync");
  EXPECT_STREQ(findingClassName(FindingClass::kStateUpdatedTwice), "state-updated-twice");
  EXPECT_STREQ(findingClassName(FindingClass::kRoundingLevel), "rounding-level");
  EXPECT_STREQ(findingClassName(FindingClass::kSemantic), "semantic");
}

// The same classes for StepResult runs (verify's engine, validate's adapters): a BatchNorm running mean moved
// twice at step 1, a generator left elsewhere at step 0, equal runs.
Mat<float> row(std::vector<float> v) {
  Mat<float> m(1, static_cast<Eigen::Index>(v.size()));
  for (size_t i = 0; i < v.size(); ++i) m(0, static_cast<Eigen::Index>(i)) = v[i];
  return m;
}

StepResult<float> stepResult(float loss, float runningMean, float batches, uint64_t rngOffset) {
  StepResult<float> r;
  r.loss = loss;
  r.grads.push_back({"b0.fc.weight", row({0.5f, -0.25f})});
  r.inputGrad = row({1.0f});
  r.state.push_back({"b0.bn.running_mean", row({runningMean, 0.0f})});
  r.state.push_back({"b0.bn.num_batches_tracked", row({batches})});
  r.rng.offset = rngOffset;
  return r;
}

TEST(DiagnoseSteps, classesFromStepResults) {
  const std::vector<NamedMat<float>> initial = {{"b0.bn.running_mean", row({0.0f, 0.0f})},
                                                {"b0.bn.num_batches_tracked", row({0.0f})}};
  // x = 1: plain moves 0 -> 0.1 -> 0.19; the checkpointed run moves 0.19 -> 0.271 at step 1 (and counts 3).
  const std::vector<StepResult<float>> plain = {stepResult(1.0f, 0.1f, 1, 4), stepResult(0.9f, 0.19f, 2, 8)};
  std::vector<StepResult<float>> twice = plain;
  twice[1].state[0].value(0, 0) = 0.271f;
  twice[1].state[1].value(0, 0) = 3;
  const auto d = diagnoseSteps(plain, twice, initial, 64);
  ASSERT_TRUE(d);
  EXPECT_EQ(d->cls, FindingClass::kStateUpdatedTwice) << d->why;

  std::vector<StepResult<float>> desync = plain;
  desync[0].rng.offset = 6;
  desync[0].grads[0].value(0, 1) = -0.3f;
  const auto r = diagnoseSteps(plain, desync, initial, 64);
  ASSERT_TRUE(r);
  EXPECT_EQ(r->cls, FindingClass::kRngDesync);

  std::vector<StepResult<float>> grads = plain;
  grads[1].grads[0].value(0, 0) = 0.75f;
  EXPECT_EQ(diagnoseSteps(plain, grads, initial, 64)->cls, FindingClass::kSemantic);
  EXPECT_FALSE(diagnoseSteps(plain, plain, initial, 64));
}

// With 2 micro-batches a step moves a running statistic twice, toward two batch values, so an extra update is
// told by the module's counter (2 increments a step, one more in the checkpointed run); a statistic that moved
// while its counter did not is another difference.
TEST(DiagnoseSteps, microBatchesTellAnExtraUpdateByTheCounter) {
  const std::vector<NamedMat<float>> initial = {{"b0.bn.running_mean", row({0.0f, 0.0f})},
                                                {"b0.bn.num_batches_tracked", row({0.0f})}};
  // Batch values 1 then 3: plain 0 -> 0.1 -> 0.39; an extra update toward 1 after the first gives 0.19 -> 0.471.
  const std::vector<StepResult<float>> plain = {stepResult(1.0f, 0.39f, 2, 4)};
  std::vector<StepResult<float>> extra = plain;
  extra[0].state[0].value(0, 0) = 0.471f;
  extra[0].state[1].value(0, 0) = 3;
  EXPECT_FALSE(diagnoseSteps(plain, extra, initial, 64)->cls == FindingClass::kStateUpdatedTwice)
      << "one update a step cannot explain a counter that moved by 3";
  const auto d = diagnoseSteps(plain, extra, initial, 64, 2);
  ASSERT_TRUE(d);
  EXPECT_EQ(d->cls, FindingClass::kStateUpdatedTwice) << d->why;
  std::vector<StepResult<float>> moved = plain;
  moved[0].state[0].value(0, 0) = 0.471f;
  EXPECT_EQ(diagnoseSteps(plain, moved, initial, 64, 2)->cls, FindingClass::kSemantic);
}

// A tensor one run never wrote (0 x 0) is absent: an input gradient dropped is a missing gradient, zero or not in
// the plain run. Two non-empty shapes are both present: nothing finer than semantic says why they differ.
TEST(DiagnoseSteps, emptyTensorIsAbsentOtherShapeIsSemantic) {
  const std::vector<NamedMat<float>> initial = {{"b0.bn.running_mean", row({0.0f, 0.0f})},
                                                {"b0.bn.num_batches_tracked", row({0.0f})}};
  std::vector<StepResult<float>> plain = {stepResult(1.0f, 0.1f, 1, 4)};
  plain[0].inputGrad = row({0.0f, 0.0f});
  std::vector<StepResult<float>> dropped = plain;
  dropped[0].inputGrad = Mat<float>();
  EXPECT_EQ(diagnoseSteps(plain, dropped, initial, 64)->cls, FindingClass::kMissingGradient);
  std::vector<StepResult<float>> reshaped = plain;
  reshaped[0].inputGrad = row({1.0f});
  EXPECT_EQ(diagnoseSteps(plain, reshaped, initial, 64)->cls, FindingClass::kSemantic);
}

}  // namespace
}  // namespace ckpt
