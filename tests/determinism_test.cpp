// The same seed gives byte-identical verify and validate JSON, whatever the thread count, apart from timing
// fields: keys named "timing", ending in "_seconds", "_ms" or "per_minute", and "threads" (the setting itself).
// Atomic report files: writeFileAtomic leaves the old file or the new one, never a mix.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "harness/validate/adapter.h"
#include "harness/atomic_file.h"
#include "tests/cli_process.h"

namespace ckpt::test {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

bool isTiming(const std::string& key) {
  auto ends = [&](const std::string& s) {
    return key.size() >= s.size() && key.compare(key.size() - s.size(), s.size(), s) == 0;
  };
  return key == "timing" || key == "threads" || ends("_seconds") || ends("_ms") || ends("per_minute");
}

// The JSON with every timing field removed, at any depth.
json withoutTiming(const json& j) {
  if (j.is_object()) {
    json o = json::object();
    for (const auto& [k, v] : j.items())
      if (!isTiming(k)) o[k] = withoutTiming(v);
    return o;
  }
  if (j.is_array()) {
    json a = json::array();
    for (const auto& v : j) a.push_back(withoutTiming(v));
    return a;
  }
  return j;
}

bool hasVerify() {
  const CliResult r = runCkptcheck({"verify", "--help"});
  return r.exitCode() == 0;
}

std::string verifyJson(int threads, const fs::path& dir, const std::vector<std::string>& extra) {
  std::vector<std::string> args = {"verify",
                                   "--seed",
                                   "11",
                                   "--no-catalogue",
                                   "--json",
                                   "--threads",
                                   std::to_string(threads),
                                   "--out",
                                   (dir / "findings").string()};
  args.insert(args.end(), extra.begin(), extra.end());
  const CliResult r = runCkptcheck(args, {}, dir, 600);
  EXPECT_TRUE(r.exitCode() == 0 || r.exitCode() == 1) << r.process.describe() << "\n" << r.err;
  return r.out;
}

// Clean (every case passes) and with a mutant (a finding, shrunk: the shrink path must not depend on threads).
void expectSameForAnyThreadCount(const std::vector<std::string>& extra, int expectFindings) {
  ScratchDir dir("determinism-verify");
  const std::string one = verifyJson(1, dir.path(), extra);
  const json a = json::parse(one, nullptr, false);
  ASSERT_TRUE(a.is_object()) << one;
  ASSERT_EQ(a["findings"].size(), static_cast<size_t>(expectFindings)) << one;
  const std::string ref = withoutTiming(a).dump(1);
  EXPECT_EQ(withoutTiming(json::parse(verifyJson(1, dir.path(), extra))).dump(1), ref) << "same seed, another run";
  for (int threads : {2, 3, 8})
    EXPECT_EQ(withoutTiming(json::parse(verifyJson(threads, dir.path(), extra))).dump(1), ref) << threads << " threads";
}

TEST(Determinism, verifyJsonIsByteIdenticalForAnyThreadCountApartFromTiming) {
  if (!hasVerify()) GTEST_SKIP() << "this ckptcheck has no verify subcommand yet";
  expectSameForAnyThreadCount({"--cases", "150", "--max-blocks", "8"}, 0);
}

TEST(Determinism, verifyFindingIsTheSameForAnyThreadCount) {
  if (!hasVerify()) GTEST_SKIP() << "this ckptcheck has no verify subcommand yet";
  expectSameForAnyThreadCount({"--cases", "300", "--max-blocks", "8", "--mutant", "state-updated-twice"}, 1);
}

// A Python that runs the numpy adapter.
std::string pythonWithNumpy() {
  for (const auto& c : {adapterPython(), std::string("/usr/bin/python3")})
    if (runProcess({c, "-c", "import numpy"}, "", "", 60).ok()) return c;
  return "";
}

// The numpy adapter, same seed, run twice into the same --out (so recorded paths agree), with its BLAS on 1 and
// on 2 threads.
TEST(Determinism, validateJsonIsByteIdenticalRunToRunApartFromTiming) {
  const std::string py = pythonWithNumpy();
  if (py.empty()) GTEST_SKIP() << "no Python with numpy for the numpy adapter";
  ScratchDir dir("determinism-validate");
  auto run = [&](const std::string& threads) {
    const CliResult r = runCkptcheck(
        {"validate", "--adapter", "numpy", "--cases", "3", "--seed", "5", "--max-blocks", "3", "--out",
         (dir.path() / "out").string()},
        {{"CKPT_PYTHON", py}, {"OMP_NUM_THREADS", threads}, {"OPENBLAS_NUM_THREADS", threads}}, dir.path(), 600);
    EXPECT_EQ(r.exitCode(), 0) << r.out << r.err;
    const json j = json::parse(readFile(dir.path() / "out" / "validate.json"), nullptr, false);
    EXPECT_TRUE(j.is_object());
    return withoutTiming(j).dump(1);
  };
  const std::string a = run("1"), b = run("1"), c = run("2");
  EXPECT_EQ(b, a);
  EXPECT_EQ(c, a);
}

TEST(AtomicFile, replacesWholeFilesAndLeavesNoTemporaries) {
  ScratchDir dir("atomic");
  const fs::path p = dir.path() / "report.json";
  writeFileAtomic(p, "first\n");
  EXPECT_EQ(readFile(p), "first\n");
  const std::string big(1 << 20, 'x');
  writeFileAtomic(p, big);
  EXPECT_EQ(readFile(p), big);
  EXPECT_EQ(fs::status(p).permissions() & fs::perms::others_read, fs::perms::others_read);
  int files = 0;
  for ([[maybe_unused]] const auto& e : fs::directory_iterator(dir.path())) ++files;
  EXPECT_EQ(files, 1) << "a temporary file was left behind";
  EXPECT_THROW(writeFileAtomic(dir.path() / "missing-folder" / "r.json", "x"), std::runtime_error);
}

}  // namespace
}  // namespace ckpt::test
