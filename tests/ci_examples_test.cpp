// The CI examples users copy (ci/examples/): they parse as YAML with the structure their CI system needs (a job
// that runs a script and publishes a JUnit report), every ckptcheck subcommand and flag they run exists (checked
// against `ckptcheck SUB --help`), every CMake option they pass is one of ours, the verify command they run
// writes a well-formed JUnit report, and they compare the overhead with the previous run's runs.json and keep
// their own for the next.
#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <regex>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include <sys/wait.h>
#include <unistd.h>

#include "tests/test_util.h"

namespace ckpt {
namespace {

namespace fs = std::filesystem;

using test::readFile;
using test::sourceDir;
// A shell command's exit status and stdout, stderr joined.
std::pair<int, std::string> run(const std::string& cmd) { return test::runShell(cmd); }

bool havePythonYaml() { return run("python3 -c 'import yaml'").first == 0; }

// The file as JSON, through python3's yaml (PyYAML); null when it does not parse.
nlohmann::json yamlAsJson(const fs::path& p) {
  const auto [rc, out] =
      run("python3 -c 'import json, sys, yaml; print(json.dumps(yaml.safe_load(open(sys.argv[1])), default=str))' '" +
          p.string() + "'");
  if (rc != 0) return nullptr;
  return nlohmann::json::parse(out, nullptr, false);
}

struct Invocation {
  std::string subcommand;
  std::vector<std::string> flags;
  std::string line;
};

// Every `.../ckptcheck SUB ...` the file runs, with the --flags it passes.
std::vector<Invocation> ckptcheckInvocations(const std::string& text) {
  std::vector<Invocation> out;
  const std::regex call(R"(bin/ckptcheck\s+([a-z-]+)([^;\n]*))");
  for (std::sregex_iterator it(text.begin(), text.end(), call), end; it != end; ++it) {
    Invocation inv{(*it)[1].str(), {}, it->str()};
    const std::string args = (*it)[2].str();
    const std::regex flag(R"((^|\s)(--[a-z][a-z-]*))");
    for (std::sregex_iterator f(args.begin(), args.end(), flag); f != end; ++f) inv.flags.push_back((*f)[2].str());
    out.push_back(inv);
  }
  return out;
}

// The -DNAME=... options a file passes to CMake.
std::set<std::string> cmakeOptions(const std::string& text) {
  std::set<std::string> out;
  const std::regex opt(R"(-D([A-Z_][A-Z0-9_]*)=)");
  for (std::sregex_iterator it(text.begin(), text.end(), opt), end; it != end; ++it) out.insert((*it)[1].str());
  return out;
}

class CiExample : public ::testing::TestWithParam<std::string> {
 protected:
  fs::path path() const { return sourceDir() / "ci" / "examples" / GetParam(); }
};

TEST_P(CiExample, parsesWithAJobThatRunsVerifyAndPublishesJUnit) {
  const std::string text = readFile(path());
  ASSERT_FALSE(text.empty()) << path();
  EXPECT_NE(text.find("verify"), std::string::npos);
  EXPECT_NE(text.find("--junit"), std::string::npos);
  if (!havePythonYaml()) {
    // Without PyYAML: the line structure of the two formats.
    EXPECT_EQ(text.find('\t'), std::string::npos) << "YAML forbids tabs for indentation";
    if (GetParam() == "github-actions.yml") {
      for (const char* key : {"\non:", "\njobs:", "    steps:", "report_paths:"})
        EXPECT_NE(text.find(key), std::string::npos) << key;
    } else {
      for (const char* key : {"  script:", "  artifacts:", "      junit:"})
        EXPECT_NE(text.find(key), std::string::npos) << key;
    }
    return;
  }
  const nlohmann::json y = yamlAsJson(path());
  ASSERT_TRUE(y.is_object()) << "does not parse as YAML: " << path();
  if (GetParam() == "github-actions.yml") {
    // PyYAML reads the key `on` as the boolean true (YAML 1.1); GitHub reads it as "on".
    EXPECT_TRUE(y.contains("on") || y.contains("True") || y.contains("true"));
    ASSERT_TRUE(y.contains("jobs") && y["jobs"].is_object() && !y["jobs"].empty());
    const auto& job = y["jobs"].begin().value();
    ASSERT_TRUE(job.contains("steps") && job["steps"].is_array());
    bool verify = false, publish = false;
    for (const auto& step : job["steps"]) {
      if (step.contains("run") && step["run"].get<std::string>().find("ckptcheck verify") != std::string::npos)
        verify = true;
      if (step.contains("with") && step["with"].contains("report_paths")) publish = true;
    }
    EXPECT_TRUE(verify) << "no step runs ckptcheck verify";
    EXPECT_TRUE(publish) << "no step publishes the JUnit report";
  } else {
    ASSERT_TRUE(y.contains("ckptcheck"));
    const auto& job = y["ckptcheck"];
    ASSERT_TRUE(job.contains("script") && job["script"].is_array());
    bool verify = false;
    for (const auto& line : job["script"])
      verify |= line.get<std::string>().find("ckptcheck verify") != std::string::npos;
    EXPECT_TRUE(verify) << "the script does not run ckptcheck verify";
    ASSERT_TRUE(job.contains("artifacts") && job["artifacts"].contains("reports"));
    EXPECT_TRUE(job["artifacts"]["reports"].contains("junit"));
    EXPECT_EQ(job["artifacts"].value("when", ""), "always") << "the report must be kept when the job fails";
  }
}

TEST_P(CiExample, everyCkptcheckSubcommandAndFlagExists) {
  const auto calls = ckptcheckInvocations(readFile(path()));
  ASSERT_FALSE(calls.empty());
  std::set<std::string> subcommands;
  for (const auto& c : calls) {
    subcommands.insert(c.subcommand);
    const auto [rc, help] = run(std::string("'") + CKPT_CLI + "' " + c.subcommand + " --help");
    ASSERT_EQ(rc, 0) << "ckptcheck " << c.subcommand << " --help failed:\n" << help;
    // An unknown subcommand gets the top-level help, whose usage line does not name it.
    ASSERT_NE(help.find(" " + c.subcommand + " [OPTIONS]"), std::string::npos)
        << c.line << "\n  ckptcheck has no subcommand " << c.subcommand;
    for (const auto& flag : c.flags) {
      const std::regex word("(^|[\\s,])" + flag + "([\\s,=]|$)");
      EXPECT_TRUE(std::regex_search(help, word))
          << c.line << "\n  " << flag << " is not an option of ckptcheck " << c.subcommand;
    }
  }
  EXPECT_TRUE(subcommands.count("verify"));
}

// The overhead regression gate: the example benchmarks, compares with the previous run's runs.json
// (`report --baseline`, a JUnit report beside verify's), and keeps this run's runs.json for the next one (GitHub:
// the Actions cache, saved from the default branch; GitLab: this job's artifacts, fetched by the next run).
TEST_P(CiExample, comparesOverheadWithThePreviousRunAndKeepsItsRuns) {
  const std::string text = readFile(path());
  EXPECT_NE(text.find("bin/bench_engine "), std::string::npos);
  bool compared = false;
  for (const auto& c : ckptcheckInvocations(text)) {
    const auto has = [&](const char* f) { return std::find(c.flags.begin(), c.flags.end(), f) != c.flags.end(); };
    compared |= c.subcommand == "report" && has("--baseline") && has("--junit");
  }
  EXPECT_TRUE(compared) << "no `ckptcheck report --baseline DIR --junit FILE`";
  EXPECT_NE(text.find("--junit reports/ckptcheck-overhead.xml"), std::string::npos)
      << "the JUnit report is not published";
  if (GetParam() == "github-actions.yml") {
    EXPECT_NE(text.find("uses: actions/cache/restore@"), std::string::npos);
    EXPECT_NE(text.find("uses: actions/cache/save@"), std::string::npos);
    EXPECT_NE(text.find("cp reports/overhead/runs.json baseline/runs.json"), std::string::npos);
  } else {
    EXPECT_NE(text.find("jobs/artifacts/$CI_DEFAULT_BRANCH/download?job=$CI_JOB_NAME"), std::string::npos);
    EXPECT_NE(text.find("reports/overhead/runs.json -d baseline"), std::string::npos);
    EXPECT_NE(text.find("      - reports/\n"), std::string::npos) << "reports/ (with overhead/runs.json) is not kept";
  }
}

TEST_P(CiExample, passesOnlyOurCMakeOptions) {
  const std::string cmake = readFile(sourceDir() / "CMakeLists.txt");
  for (const auto& opt : cmakeOptions(readFile(path()))) {
    if (opt == "CMAKE_BUILD_TYPE") continue;
    EXPECT_NE(cmake.find("option(" + opt + " "), std::string::npos) << opt << " is not an option of CMakeLists.txt";
  }
}

INSTANTIATE_TEST_SUITE_P(Examples, CiExample, ::testing::Values("github-actions.yml", "gitlab-ci.yml"),
                         [](const ::testing::TestParamInfo<std::string>& p) {
                           return p.param == "github-actions.yml" ? std::string("github") : std::string("gitlab");
                         });

// The verify command of the examples, with few cases: exit 0 and a JUnit report with one test case per property.
TEST(CiExamples, verifyWritesAWellFormedJUnitReport) {
  const fs::path dir = fs::temp_directory_path() / ("ckptcheck-ci-examples-" + std::to_string(::getpid()));
  fs::create_directories(dir / "reports");
  const fs::path xml = dir / "reports" / "ckptcheck-verify.xml";
  const auto [rc, out] = run(std::string("'") + CKPT_CLI + "' verify --cases 5 --seed 1 --no-catalogue --junit '" +
                             xml.string() + "' --out '" + (dir / "reports" / "findings").string() + "'");
  EXPECT_EQ(rc, 0) << out;
  const std::string report = readFile(xml);
  EXPECT_NE(report.find("<testsuites"), std::string::npos);
  size_t cases = 0;
  for (size_t at = report.find("<testcase "); at != std::string::npos; at = report.find("<testcase ", at + 1)) ++cases;
  // One test case per property: as many as verify's JSON lists.
  const auto [jrc, jout] = run(std::string("'") + CKPT_CLI + "' verify --cases 1 --seed 1 --no-catalogue --json");
  EXPECT_EQ(jrc, 0) << jout;
  EXPECT_EQ(cases, nlohmann::json::parse(jout.substr(jout.find('{')))["properties"].size());
  EXPECT_GE(cases, 5u);
  if (run("python3 -c 'import xml'").first == 0) {
    const auto [xrc, xout] =
        run("python3 -c 'import sys, xml.etree.ElementTree as E; E.parse(sys.argv[1])' '" + xml.string() + "'");
    EXPECT_EQ(xrc, 0) << "not well-formed XML: " << xout;
  }
  fs::remove_all(dir);
}

}  // namespace
}  // namespace ckpt
