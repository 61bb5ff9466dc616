// GoogleTest's sharding variables are honoured, so CI systems can spread the suite over machines: running a test
// binary as GTEST_TOTAL_SHARDS=N, GTEST_SHARD_INDEX=0..N-1 runs every test exactly once over the shards.
// (gtest itself implements it; this guards against a main() or a runner that would bypass it.)
#include <gtest/gtest.h>

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
  const ProcessResult r = runProcess({shardedBinary()}, (io.path() / "out").string(), (io.path() / "err").string(), 300);
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
    const auto part = ranTests({{"GTEST_TOTAL_SHARDS", std::to_string(shards)}, {"GTEST_SHARD_INDEX", std::to_string(i)}});
    EXPECT_LT(part.size(), whole.size()) << "shard " << i << " ran everything";
    united.insert(part.begin(), part.end());
  }
  EXPECT_EQ(united, whole);  // a multiset: nothing twice, nothing lost
}

}  // namespace
}  // namespace ckpt::test
