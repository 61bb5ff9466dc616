// The resource guard (harness/engine/resource_guard.h): byte counts parse, the limit comes from the flag, the
// environment or the machine, the analytic parameter count matches the blocks the reference builds, and a case
// over the limit is refused with the planned figure, before anything of it is allocated.
#include <gtest/gtest.h>

#include <cstdlib>

#include "cases/case_json.h"
#include "harness/engine/chain_cost.h"
#include "harness/engine/plan.h"
#include "harness/engine/resource_guard.h"
#include "reference/chain.h"

namespace ckpt {
namespace {

std::string refusal(const std::function<void()>& f) {
  try {
    f();
  } catch (const InputError& e) {
    return e.what();
  }
  return "";
}

TEST(ResourceGuard, parsesByteCounts) {
  EXPECT_EQ(parseByteCount("1", "x"), 1);
  EXPECT_EQ(parseByteCount("1000000", "x"), 1000000);
  EXPECT_EQ(parseByteCount("4K", "x"), 4096);
  EXPECT_EQ(parseByteCount("4KiB", "x"), 4096);
  EXPECT_EQ(parseByteCount("512m", "x"), int64_t{512} << 20);
  EXPECT_EQ(parseByteCount("1.5G", "x"), int64_t{3} << 29);
  EXPECT_EQ(parseByteCount("2T", "x"), int64_t{2} << 40);
  EXPECT_EQ(parseByteCount("100B", "x"), 100);
  for (const char* bad : {"", "0", "-5", "abc", "1..2", ".5", "5.", "12Q", "1e9", "1 G", "99999999999T", "0.1"})
    EXPECT_NE(refusal([&] { parseByteCount(bad, "--max-activation-bytes"); }).find("--max-activation-bytes: "),
              std::string::npos)
        << bad;
}

TEST(ResourceGuard, limitComesFromTheFlagThenTheEnvironmentThenTheMachine) {
  unsetenv(kMaxActivationBytesEnv);
  const MemoryLimit def = memoryLimit("");
  EXPECT_EQ(def.bytes, machineMemoryBytes() / 2);
  EXPECT_GT(def.bytes, 0);
  setenv(kMaxActivationBytesEnv, "64M", 1);
  EXPECT_EQ(memoryLimit("").bytes, int64_t{64} << 20);
  EXPECT_EQ(memoryLimit("").source, kMaxActivationBytesEnv);
  EXPECT_EQ(memoryLimit("1K").bytes, 1024);
  EXPECT_EQ(memoryLimit("1K").source, "--max-activation-bytes");
  setenv(kMaxActivationBytesEnv, "plenty", 1);
  EXPECT_NE(refusal([] { memoryLimit(""); }).find("CKPT_MAX_ACTIVATION_BYTES: "), std::string::npos);
  unsetenv(kMaxActivationBytesEnv);
}

// The guard counts parameters from the spec alone; it must agree with what buildChain allocates.
TEST(ResourceGuard, parameterCountMatchesTheBuiltBlocks) {
  for (const char* kind : {"mlp", "residual-bn", "transformer"}) {
    const CaseSpec c = parseCaseText(std::string(R"({"batch": 2, "seq": 3, "width": 12, "blocks": [{"kind": ")") +
                                     kind + (std::string(kind) == "transformer" ? R"(", "heads": 3}]})" : R"("}]})"));
    Chain<double> chain = buildChain<double>(c);
    int64_t n = 0;
    for (auto* p : chain.params()) n += p->value.size();
    EXPECT_EQ(blockParameterCount(c.blocks[0], c), n) << kind;
  }
}

TEST(ResourceGuard, refusesAPlanOverTheLimitWithThePlannedFigure) {
  const CaseSpec c = parseCaseText(R"({"name": "t", "batch": 2, "seq": 4, "width": 8,
      "blocks": [{"kind": "mlp", "repeat": 16}, {"kind": "transformer", "heads": 2}]})");
  const ChainCost cost = caseChainCost(c);
  const int64_t storeAll = planSchedule(storeAllSchedule(cost), cost).peakActivationBytes;
  const int64_t uniform = planSchedule(makeSchedule(parsePolicy("uniform"), cost), cost).peakActivationBytes;
  ASSERT_LT(uniform, storeAll);
  // At exactly the store-all peak everything passes; one byte less refuses store-all, naming its figure.
  EXPECT_NO_THROW(guardCase(c, {parsePolicy("uniform")}, {storeAll, "test", int64_t{1} << 30}));
  const std::string m =
      refusal([&] { guardCase(c, {parsePolicy("uniform")}, {storeAll - 1, "test", int64_t{1} << 30}); });
  EXPECT_NE(m.find("case 't': planned peak activation bytes " + std::to_string(storeAll) + " bytes"), std::string::npos)
      << m;
  EXPECT_NE(m.find("store-all (the reference)"), std::string::npos) << m;
  EXPECT_NE(m.find("set by test"), std::string::npos) << m;
}

TEST(ResourceGuard, refusesFromTheSpecAloneWhatCannotBeBuilt) {
  // 100 transformer blocks of width 65536: ~8e12 parameters; checked in long double, nothing allocated.
  const CaseSpec huge = parseCaseText(R"({"name": "huge", "batch": 1, "seq": 2, "width": 65536,
      "blocks": [{"kind": "transformer", "repeat": 100}]})");
  EXPECT_NE(refusal([&] { guardCase(huge, {}, memoryLimit("")); }).find("its parameters and their gradients take"),
            std::string::npos);
  // Attention scores of 2^16 sequences of 2^16 tokens: far beyond int64 element counts times the heads.
  const CaseSpec scores = parseCaseText(R"({"name": "s", "batch": 65536, "seq": 65536, "width": 65536,
      "blocks": [{"kind": "transformer", "heads": 65536}]})");
  EXPECT_NE(refusal([&] { guardCaseSizes(scores, {int64_t{1} << 62, "test"}); }).find("s'"), std::string::npos);
  // A small case passes stage 1 under a small limit that its plan then exceeds.
  const CaseSpec tiny = parseCaseText(R"({"name": "tiny", "batch": 2, "width": 8, "blocks": [{"kind": "mlp"}]})");
  EXPECT_NO_THROW(guardCaseSizes(tiny, {4096, "test", int64_t{1} << 20}));
  // Parameters have their own limit: the flag bounds activations only.
  EXPECT_NE(refusal([&] {
              guardCaseSizes(tiny, {int64_t{1} << 30, "test", 1000});
            }).find("its parameters and their gradients take 1152 bytes"),
            std::string::npos);
}

}  // namespace
}  // namespace ckpt
