// The class of verify's findings (harness/diagnose.h, the classifier validate uses): for every mutant of the
// catalogue, `ckptcheck verify --mutant M` is run as CI runs it (seed 1, the default budget of 100 random cases,
// random cases only) and the class its record pins (Mutant::diagnosis) is checked in its three outputs: the JSON
// finding's "diagnosis", the JUnit failure message, and the text report (which the JUnit failure body carries,
// and which stdout prints). The class is also checked before shrinking (in process, no shrink), so it describes
// the mutant's bug, not an accident of the shrunk case. The correct engine has no finding and prints no class.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <regex>
#include <string>

#include "harness/mutants/catalog.h"
#include "harness/verify/search.h"
#include "tests/cli_process.h"

namespace ckpt {
namespace {

// The class the mutant's record pins for its finding (seed 1, before and after shrinking; why: the mutant's file).
std::string expectedClass(const std::string& mutant) { return findingClassName(findMutant(mutant)->diagnosis); }

std::vector<std::string> verifyArgs(const std::string& mutant, const test::ScratchDir& dir) {
  std::vector<std::string> a = {"verify",
                                "--cases",
                                "100",
                                "--seed",
                                "1",
                                "--no-catalogue",
                                "--json",
                                "--junit",
                                (dir.path() / "junit.xml").string(),
                                "--out",
                                (dir.path() / "out").string()};
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
  ASSERT_EQ(f["property_id"], findMutant(mutant)->caughtBy) << f.dump();
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
                         [](const ::testing::TestParamInfo<std::string>& p) { return test::testName(p.param); });

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
