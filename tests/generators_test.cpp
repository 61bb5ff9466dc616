// The random cases verify and validate draw (cases/generators.h) reach the settings where narrow bugs hide, and
// reach them early: a user running 10 cases gets a spread, not ten 1-block width-2 models. Checked with the
// coverage table both commands print (cases/coverage.h), over the first cases of fixed seeds, as verify draws them.
#include <gtest/gtest.h>

#include <string>

#include "cases/coverage.h"
#include "harness/verify/policy_draw.h"
#include "harness/verify/search.h"

namespace ckpt {
namespace {

// The first n cases of a seed, at verify's sizes (case i at RapidCheck size i mod 100).
Coverage firstCases(uint64_t seed, int n, const GenLimits& lim = verifyLimits()) {
  Coverage cov;
  const auto gen = genVerifyCase(lim);
  for (int i = 0; i < n; ++i)
    cov.add(gen(rc::Random(rc::Random::Key{seed, static_cast<uint64_t>(i), 7, 7}), i % 100).value().spec);
  return cov;
}

int64_t countOf(const Coverage& c, const std::string& id) {
  const auto& f = coverageFeatures();
  for (size_t k = 0; k < f.size(); ++k)
    if (id == f[k].id) return c.count(k);
  ADD_FAILURE() << "no coverage feature " << id;
  return 0;
}

TEST(Generators, theFirstFortyCasesOfEverySeedCoverEveryFeature) {
  for (uint64_t seed = 1; seed <= 10; ++seed) {
    const Coverage c = firstCases(seed, 40);
    const auto& f = coverageFeatures();
    for (size_t k = 0; k < f.size(); ++k) EXPECT_GT(c.count(k), 0) << "seed " << seed << ": " << f[k].text;
  }
}

TEST(Generators, spreadMatchesTheDocumentedShares) {
  const Coverage c = firstCases(99, 2000);
  auto share = [&](const char* id) { return static_cast<double>(countOf(c, id)) / 2000.0; };
  EXPECT_NEAR(share("dropout_off"), 0.30, 0.04);
  EXPECT_NEAR(share("dropout_small"), 0.29, 0.04);
  EXPECT_NEAR(share("dropout_large"), 0.18, 0.04);
  EXPECT_NEAR(share("segments_3"), 0.40, 0.05);
  EXPECT_NEAR(share("segments_5"), 0.15, 0.04);
  EXPECT_GT(share("width_odd"), 0.35);
  EXPECT_GT(share("batch_1"), 0.10);
  EXPECT_GT(share("lr_other"), 0.70);
}

// Every permille, 0..1000 inclusive, gives a batch's divisor (or none below 700); the top one the largest.
TEST(Generators, microBatchDrawGivesADivisorOfTheBatch) {
  for (int64_t batch : {1, 2, 3, 4, 6, 12}) {
    for (int draw = 0; draw <= 1000; ++draw) {
      CaseSpec c;
      c.batch = batch;
      applyMicroBatchDraw(c, draw, true);
      EXPECT_EQ(batch % c.microBatches, 0) << "batch " << batch << " draw " << draw;
      if (draw < 700 || batch == 1) EXPECT_EQ(c.microBatches, 1);
      else EXPECT_GT(c.microBatches, 1);
    }
    CaseSpec top;
    top.batch = batch;
    applyMicroBatchDraw(top, 1000, true);
    EXPECT_EQ(top.microBatches, batch);
  }
}

// validate's limits (an adapter's capabilities, --max-blocks 24 by default) keep the long chains.
TEST(Generators, validateDefaultsReachFiveSegments) {
  GenLimits lim;
  lim.maxBlocks = 24;
  lim.maxSteps = 2;
  EXPECT_GT(countOf(firstCases(3, 40, lim), "segments_5"), 0);
}

TEST(Generators, chainLengthIsMonotoneAndWithinLimits) {
  for (int maxBlocks : {1, 3, 6, 7, 20, 24, 40}) {
    int last = 0;
    for (int u = 0; u <= 1000; ++u) {
      const int n = chainLength(u, maxBlocks);
      EXPECT_GE(n, std::max(1, last)) << "u " << u << " max " << maxBlocks;
      EXPECT_LE(n, maxBlocks);
      last = n;
    }
    EXPECT_EQ(chainLength(0, maxBlocks), 1);
    EXPECT_EQ(chainLength(1000, maxBlocks), maxBlocks);
  }
}

TEST(Generators, policyParametersHitBothEndsOfTheirRanges) {
  int low = 0, high = 0, longChains = 0, segmentsLeast = 0, segmentsFull = 0;
  const auto gen = genPolicyDraw();
  for (int i = 0; i < 1000; ++i) {
    const PolicyDraw d = gen(rc::Random(rc::Random::Key{5, static_cast<uint64_t>(i), 0, 0}), i % 100).value();
    low += d.uniformK == 0;
    high += d.revolveSlots == 1000;
    segmentsLeast += d.segmentsBudget == 0;  // segments' least feasible budget (policy_rules_test: drawn exactly)
    segmentsFull += d.segmentsBudget == 1000;
    longChains += d.longLayers > 0;
    EXPECT_TRUE(d.longLayers == 0 || (d.longLayers >= 100 && d.longLayers <= 1000)) << d.longLayers;
  }
  EXPECT_NEAR(low, 150, 40);
  EXPECT_NEAR(high, 150, 40);
  EXPECT_NEAR(longChains, 50, 25);
  EXPECT_NEAR(segmentsLeast, 150, 40);
  EXPECT_NEAR(segmentsFull, 150, 40);
}

TEST(Generators, everyDrawnCaseIsValid) {
  const auto gen = genCase(verifyLimits());
  for (int i = 0; i < 500; ++i) {
    const CaseSpec c = gen(rc::Random(rc::Random::Key{8, static_cast<uint64_t>(i), 0, 0}), i % 100).value();
    EXPECT_NO_THROW(parseCase(caseToJson(c))) << caseToJson(c).dump();
  }
}

TEST(Coverage, countsAndPrintsWhatWasNotCovered) {
  Coverage c;
  CaseSpec a;
  a.blocks = {BlockSpec{blockKind("mlp"), Activation::kRelu, 1}};
  a.width = 3;
  c.add(a);
  EXPECT_EQ(c.cases(), 1);
  EXPECT_EQ(countOf(c, "width_odd"), 1);
  EXPECT_EQ(countOf(c, "transformer"), 0);
  const std::string text = c.toText();
  EXPECT_NE(text.find("NOT covered:"), std::string::npos);
  EXPECT_NE(text.find("a transformer block"), std::string::npos);
  const Coverage back = Coverage::fromJson(c.toJson());
  EXPECT_EQ(back.toText(), text);
}

}  // namespace
}  // namespace ckpt
