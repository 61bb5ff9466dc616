// GoogleTest's sharding variables are honoured, so CI systems can spread the suite over machines: running a test
// binary as GTEST_TOTAL_SHARDS=N, GTEST_SHARD_INDEX=0..N-1 runs every test exactly once over the shards.
// (gtest itself implements it; this guards against a main() or a runner that would bypass it.)
// `ckptcheck verify --shard I/N` splits its cases the same way: the shards together check what one run checks.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include <set>
#include <sstream>

#include "tests/cli_process.h"

namespace ckpt::test {
namespace {

std::string shardedBinary() {
#ifdef CKPT_SHARDED_BINARY
  return CKPT_SHARDED_BINARY;
#else
  return "policy_parse_test";
#endif
}

// The tests a run executed, from its "[ RUN      ] Suite.name" lines.
std::multiset<std::string> ranTests(const std::map<std::string, std::string>& env) {
  ScratchDir io("shard");
  for (const auto& [k, v] : env) setenv(k.c_str(), v.c_str(), 1);
  const ProcessResult r =
      runProcess({shardedBinary()}, (io.path() / "out").string(), (io.path() / "err").string(), 300);
  for (const auto& [k, v] : env) unsetenv(k.c_str());
  EXPECT_TRUE(r.ok()) << r.describe() << "\n" << readFile(io.path() / "err");
  std::multiset<std::string> names;
  std::istringstream out(readFile(io.path() / "out"));
  for (std::string line; std::getline(out, line);)
    if (line.rfind("[ RUN      ] ", 0) == 0) names.insert(line.substr(13));
  return names;
}

TEST(GtestSharding, shardsPartitionTheSuite) {
  unsetenv("GTEST_TOTAL_SHARDS");
  unsetenv("GTEST_SHARD_INDEX");
  const std::multiset<std::string> whole = ranTests({});
  ASSERT_GE(whole.size(), 3u);
  const int shards = 3;
  std::multiset<std::string> united;
  for (int i = 0; i < shards; ++i) {
    const auto part =
        ranTests({{"GTEST_TOTAL_SHARDS", std::to_string(shards)}, {"GTEST_SHARD_INDEX", std::to_string(i)}});
    EXPECT_LT(part.size(), whole.size()) << "shard " << i << " ran everything";
    united.insert(part.begin(), part.end());
  }
  EXPECT_EQ(united, whole);  // a multiset: nothing twice, nothing lost
}

nlohmann::json verify(const std::vector<std::string>& extra) {
  ScratchDir dir("verify-shard");
  std::vector<std::string> args = {"verify",       "--cases", "40",     "--seed",    "3",
                                   "--max-blocks", "6",       "--json", "--threads", "2"};
  args.insert(args.end(), extra.begin(), extra.end());
  const CliResult r = runCkptcheck(args, {}, dir.path(), 600);
  EXPECT_EQ(r.exitCode(), 0) << r.err;
  return nlohmann::json::parse(r.out, nullptr, false);
}

TEST(VerifyShard, shardsTogetherCheckWhatOneRunChecks) {
  if (runCkptcheck({"verify", "--help"}).exitCode() != 0) GTEST_SKIP() << "no verify subcommand";
  const nlohmann::json whole = verify({});
  ASSERT_TRUE(whole.is_object());
  const int n = 3;
  int64_t random = 0, catalogue = 0, runs = 0;
  std::vector<int64_t> checked(4, 0);
  for (int i = 0; i < n; ++i) {
    const nlohmann::json part = verify({"--shard", std::to_string(i) + "/" + std::to_string(n)});
    ASSERT_TRUE(part.is_object());
    EXPECT_EQ(part.value("shard", ""), std::to_string(i) + "/" + std::to_string(n));
    EXPECT_LT(part["random_cases"].get<int64_t>(), whole["random_cases"].get<int64_t>());
    random += part["random_cases"].get<int64_t>();
    catalogue += part["catalogue_cases"].get<int64_t>();
    runs += part["policy_runs"].get<int64_t>();
    for (size_t k = 0; k < 4; ++k) checked[k] += part["properties"][k]["checked"].get<int64_t>();
  }
  EXPECT_EQ(random, whole["random_cases"].get<int64_t>());
  EXPECT_EQ(catalogue, whole["catalogue_cases"].get<int64_t>());
  EXPECT_EQ(runs, whole["policy_runs"].get<int64_t>()) << "the same cases ran the same policies";
  for (size_t k = 0; k < 4; ++k)
    EXPECT_EQ(checked[k], whole["properties"][k]["checked"].get<int64_t>()) << "property " << k + 1;
}

}  // namespace
}  // namespace ckpt::test
