// The class of verify's findings (harness/diagnose.h, the classifier validate uses): for every mutant of the
// catalogue, `ckptcheck verify --mutant M` is run as CI runs it (seed 1, the default budget of 100 random cases,
// random cases only) and the class is pinned in its three outputs: the JSON finding's "diagnosis", the JUnit
// failure message, and the text report (which the JUnit failure body carries, and which stdout prints). The class
// is also pinned before shrinking (in process, no shrink), so it describes the mutant's bug, not an accident of
// the shrunk case. The correct engine has no finding and prints no class.
#include <gtest/gtest.h>

#include <map>
#include <nlohmann/json.hpp>
#include <regex>
#include <string>

#include "harness/mutants/catalog.h"
#include "harness/verify/search.h"
#include "tests/cli_process.h"

namespace ckpt {
namespace {

// The class each mutant's bitwise finding gets (seed 1, before and after shrinking), and why it is the right one.
const std::map<std::string, std::string> kExpectedClass = {
    // The recompute draws other dropout masks and puts the generator back, so no generator state shows it; with
    // dropout off the runs agree bit for bit (validate's re-run, worthDropoutOffRerun).
    {"rng-not-restored", "rng-desync"},
    // The generator after the step is where the recompute's draws left it.
    {"rng-left-advanced", "rng-desync"},
    // BatchNorm's running statistics and counter moved one more momentum update by the recompute.
    {"state-updated-twice", "state-updated-twice"},
    // Recomputed blocks fed the wrong input, or a stale or overwritten saved tensor: the backward differentiates
    // another function, and gradients are off by far more than rounding (infinitely many ULPs of a zero scale).
    {"segment-input-fed", "semantic"},
    {"segment-boundary-off-by-one", "semantic"},
    {"stale-checkpoint-buffer", "semantic"},
    {"inplace-overwrites-checkpoint", "semantic"},
    // Exact-erf GELU in the recompute where the forward used the tanh approximation: the two differ by about
    // 1e-4 relative (7e11 ULPs of the tensor's scale in double), another function, not a summation order.
    {"recompute-numerics", "semantic"},
    // Products rounded to bfloat16 in the recompute of a float64 model: 8 significand bits, about 4e12 ULPs of
    // the scale; rounding-level is for differences within 64 ULPs, not for a lost precision.
    {"recompute-low-precision", "semantic"},
    // Every gradient doubled: none of the narrower classes (none is "scaled") explains a factor of two.
    {"grads-accumulated-twice", "semantic"},
    // The recomputed tape keeps the dropout mask as allocated (zeros), so the gradients through that dropout are
    // all zero while the generator stays in sync: missing, not redrawn.
    {"context-before-filled", "missing-gradient"},
    // The gradient of the chain's input is never written (absent, even where the plain one is zero).
    {"input-grad-dropped", "missing-gradient"},
    // A shared parameter's uses added in another order: the sums differ by an ULP or two of their scale, which is
    // what a summation order does and all it does.
    {"shared-grads-forward-order", "rounding-level"},
    // Frozen weights moved by the first step: the second step computes another function.
    {"frozen-params-updated", "semantic"},
    // The parameter gradients of a recomputed block whose input needs no gradient are zeroed.
    {"no-grad-input-segment", "missing-gradient"},
    // The earlier micro-batches' share of a recomputed block's gradient is lost: what is left is another
    // gradient, not a scaled or a rounded one (the micro-batches' gradients differ).
    {"micro-batch-grads-zeroed", "semantic"},
    {"tied-head-grad-dropped", "semantic"},
    // The redrawn decisions send gradient through other branches; with the draws off (randomnessOff: no drop-path
    // node) the runs agree bit for bit.
    {"drop-path-redrawn", "rng-desync"},
    // Other slopes in the recompute; with RReLU's range collapsed (randomnessOff) the runs agree bit for bit.
    {"rrelu-slopes-regenerated", "rng-desync"},
    // A float recompute of a bf16 forward: up to a bf16 ULP (2^-8 relative) apart, far beyond rounding-level's
    // 64 float ULPs.
    {"bf16-recompute-in-float", "semantic"},
    // Other jitter in the recompute routes tokens differently; with the jitter off (randomnessOff) the runs agree.
    {"moe-jitter-redrawn", "rng-desync"},
    // The expert counts and the aux-loss tracker moved again by the recompute: the loss that reads the tracker
    // differs too, and counts that move by whole tokens per expert are no momentum update, so no narrower class
    // than semantic fits (the report still names the loss and the buffers that differ).
    {"moe-aux-loss-recorded-twice", "semantic"},
};

std::string expectedClass(const std::string& mutant) {
  const auto it = kExpectedClass.find(mutant);
  return it == kExpectedClass.end() ? "(pin the class of " + mutant + " in kExpectedClass)" : it->second;
}

std::vector<std::string> verifyArgs(const std::string& mutant, const test::ScratchDir& dir) {
  std::vector<std::string> a = {"verify", "--cases", "100", "--seed", "1", "--no-catalogue", "--json",
                                "--junit", (dir.path() / "junit.xml").string(), "--out", (dir.path() / "out").string()};
  if (!mutant.empty()) a.insert(a.end(), {"--mutant", mutant});
  return a;
}

class VerifyDiagnosis : public ::testing::TestWithParam<std::string> {};

TEST_P(VerifyDiagnosis, findingCarriesItsClassInJsonJunitAndText) {
  const std::string mutant = GetParam();
  const std::string cls = expectedClass(mutant);
  test::ScratchDir dir("verify-diagnosis");
  const test::CliResult r = test::runCkptcheck(verifyArgs(mutant, dir), {}, {}, 600);
  ASSERT_EQ(r.exitCode(), 1) << r.err;
  const nlohmann::json j = nlohmann::json::parse(r.out);
  ASSERT_EQ(j["findings"].size(), 1u);
  const nlohmann::json& f = j["findings"][0];
  ASSERT_EQ(f["property_id"], "bitwise-equal") << f.dump();
  ASSERT_TRUE(f["diagnosis"].is_object()) << f.dump();
  EXPECT_EQ(f["diagnosis"]["class"], cls) << f["diagnosis"].dump() << "\n" << f["message"];
  EXPECT_FALSE(f["diagnosis"]["why"].get<std::string>().empty());
  EXPECT_TRUE(f["difference"].is_object()) << "the class is next to the raw difference, not instead of it";

  const std::string junit = test::readFile(dir.path() / "junit.xml");
  EXPECT_NE(junit.find("; class " + cls + "\""), std::string::npos) << junit;  // the failure message
  // The body is verify's text report: the class line follows the first differing tensor.
  const std::regex text("first differing tensor: step [0-9]+ [^\n]*\n  class       " + cls + ": ");
  EXPECT_TRUE(std::regex_search(junit, text)) << junit;
}

TEST_P(VerifyDiagnosis, classIsTheSameBeforeShrinking) {
  VerifyOptions o;
  o.cases = 100;
  o.seed = 1;
  o.mutant = GetParam();
  o.catalogue = false;
  o.maxShrinkTrials = 0;
  const VerifyReport r = runVerify(o);
  ASSERT_TRUE(r.finding);
  ASSERT_TRUE(r.finding->violation.diagnosis) << r.finding->violation.message;
  EXPECT_EQ(findingClassName(r.finding->violation.diagnosis->cls), expectedClass(o.mutant))
      << r.finding->origin << ": " << r.finding->violation.message << "; " << r.finding->violation.diagnosis->why;
}

std::vector<std::string> mutantNames() {
  std::vector<std::string> v;
  for (const auto& m : mutantCatalog()) v.push_back(m.name);
  return v;
}

INSTANTIATE_TEST_SUITE_P(Catalogue, VerifyDiagnosis, ::testing::ValuesIn(mutantNames()),
                         [](const ::testing::TestParamInfo<std::string>& p) {
                           std::string n = p.param;
                           for (char& c : n)
                             if (c == '-') c = '_';
                           return n;
                         });

TEST(VerifyDiagnosis, everyMutantHasAPinnedClass) {
  for (const auto& m : mutantCatalog()) EXPECT_TRUE(kExpectedClass.count(m.name)) << m.name;
}

// No false alarm: the same budget with the correct engine finds nothing, so nothing is classed.
TEST(VerifyDiagnosis, correctEngineHasNoFindingAndNoClass) {
  test::ScratchDir dir("verify-diagnosis");
  const test::CliResult r = test::runCkptcheck(verifyArgs("", dir), {}, {}, 600);
  ASSERT_EQ(r.exitCode(), 0) << r.out << r.err;
  const nlohmann::json j = nlohmann::json::parse(r.out);
  EXPECT_TRUE(j["findings"].empty());
  EXPECT_EQ(r.out.find("\"diagnosis\""), std::string::npos);
  EXPECT_EQ(test::readFile(dir.path() / "junit.xml").find("; class "), std::string::npos);
}

// What a person reads: stdout's text names the class on its own line, next to the first differing tensor.
TEST(VerifyDiagnosis, textReportPrintsTheClass) {
  test::ScratchDir dir("verify-diagnosis");
  const test::CliResult r = test::runCkptcheck(
      {"verify", "--mutant", "input-grad-dropped", "--no-catalogue", "--out", (dir.path() / "out").string()}, {}, {},
      600);
  ASSERT_EQ(r.exitCode(), 1) << r.err;
  EXPECT_TRUE(std::regex_search(
      r.out, std::regex("first differing tensor: step 0 input_grad[^\n]*\n  class       missing-gradient: ")))
      << r.out;
}

}  // namespace
}  // namespace ckpt
