// The `plan` and `run` subcommands' contract, as reports and CI read it: JSON field names and types, exit codes
// (0 all holds, 1 a finding, 2 bad input), and --help on both.
#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <string>

#include "tests/test_util.h"

namespace ckpt {
namespace {

std::string catalogue(const std::string& name) { return test::catalogueCase(name).string(); }

// Runs ckptcheck with `args`; returns its exit status and stdout (stderr separately discarded or joined).
std::pair<int, std::string> ckptcheck(const std::string& args, bool joinStderr = false) {
  return test::runShell(std::string(CKPT_CLI) + " " + args, joinStderr);
}

void expectCostFields(const nlohmann::json& j) {
  EXPECT_TRUE(j["peak_activation_bytes"].is_number_integer());
  EXPECT_TRUE(j["forward_evals"].is_number_integer());
  for (const char* phase : {"forward", "recompute", "backward"})
    EXPECT_TRUE(j["flops"][phase].is_number_integer()) << phase;
}

TEST(CliPlan, homogeneousChainJson) {
  const auto [rc, out] = ckptcheck("plan --layers 1000 --policy uniform --json");
  ASSERT_EQ(rc, 0);
  const auto j = nlohmann::json::parse(out);
  EXPECT_EQ(j["policy"], "uniform:k=32");
  EXPECT_EQ(j["layers"], 1000);
  expectCostFields(j);
  EXPECT_EQ(j["forward_evals"], 1000 + 968);  // the last segment [968, 1000) is never recomputed
  EXPECT_TRUE(j["flop_overhead"].is_number());
  EXPECT_FALSE(j.contains("schedule"));
}

TEST(CliPlan, caseWithSchedule) {
  const auto [rc, out] = ckptcheck("plan --case " + catalogue("tiny") + " --policy store-all --json --schedule");
  ASSERT_EQ(rc, 0);
  const auto j = nlohmann::json::parse(out);
  EXPECT_EQ(j["layers"], 3);
  EXPECT_EQ(j["flops"]["recompute"], 0);
  EXPECT_EQ(j["schedule"]["instructions"].size(), 10u);
}

TEST(CliRun, bitwiseEqualAndPlannedEqualsMeasured) {
  const auto [rc, out] = ckptcheck("run --case " + catalogue("tiny") + " --policy uniform+selective --steps 2 --json");
  ASSERT_EQ(rc, 0) << out;
  const auto j = nlohmann::json::parse(out);
  EXPECT_EQ(j["bitwise_equal"], true);
  EXPECT_TRUE(j["differences"].is_array());
  EXPECT_TRUE(j["differences"].empty());
  expectCostFields(j["planned"]);
  expectCostFields(j["measured"]);
  EXPECT_EQ(j["planned"], j["measured"]);
  EXPECT_EQ(j["planned_equals_measured"], true);
  EXPECT_TRUE(j["flop_overhead"].is_number());
  EXPECT_TRUE(j["wall_ms"]["reference"].is_number());
  EXPECT_TRUE(j["wall_ms"]["policy"].is_number());
  EXPECT_TRUE(j["time_ratio"].is_number());
}

TEST(CliRun, counterRngOverride) {
  const auto [rc, out] = ckptcheck("run --case " + catalogue("tiny") + " --policy recursive --rng counter --json");
  ASSERT_EQ(rc, 0) << out;
  EXPECT_EQ(nlohmann::json::parse(out)["rng"], "counter");
}

TEST(CliEngine, badInputExitsTwoWithOneLine) {
  auto [rc, out] = ckptcheck("plan --layers 10 --policy revolve", true);
  EXPECT_EQ(rc, 2);
  EXPECT_EQ(out, "ckptcheck: policy 'revolve': needs slots=C (C >= 1)\n");
  rc = ckptcheck("run --case " + catalogue("tiny") + " --policy nope").first;
  EXPECT_EQ(rc, 2);
  rc = ckptcheck("plan --policy uniform").first;
  EXPECT_EQ(rc, 2);
}

// The device executor behind `--device`: the same checks as on the CPU, against the device's own store-all.
TEST(CliDevice, runOnTheEmulatedDeviceIsBitwiseAndPlannedEqualsMeasured) {
  const auto [rc, out] = ckptcheck("run --case " + catalogue("tiny") +
                                   " --policy uniform+selective --steps 2 --device cuda-emulated --json");
  ASSERT_EQ(rc, 0) << out;
  const auto j = nlohmann::json::parse(out);
  EXPECT_EQ(j["device"], "cuda-emulated");
  EXPECT_TRUE(j["bitwise_equal"].get<bool>());
  EXPECT_TRUE(j["planned_equals_measured"].get<bool>());
  EXPECT_EQ(j["planned"]["peak_activation_bytes"], j["measured"]["peak_activation_bytes"]);
  EXPECT_GT(j["measured"]["flops"]["recompute"].get<int64_t>(), 0);
}

TEST(CliDevice, verifyOnTheEmulatedDeviceHolds) {
  const auto [rc, out] =
      ckptcheck("verify --device cuda-emulated --cases 6 --seed 5 --max-blocks 4 --no-catalogue --json");
  ASSERT_EQ(rc, 0) << out;
  const auto j = nlohmann::json::parse(out);
  EXPECT_EQ(j["device"], "cuda-emulated");
  EXPECT_EQ(j["random_cases"], 6);
  EXPECT_GT(j["policy_runs"].get<int64_t>(), 6);
}

// Mutants run on a device through the same executor and hooks: `run` shows the broken engine differs from the
// device's store-all, `verify` finds it (exit 1) and its replay line keeps the device.
TEST(CliDevice, mutantOnTheEmulatedDeviceIsCaught) {
  const auto [runRc, runOut] = ckptcheck("run --case " + catalogue("tiny") +
                                         " --policy uniform --steps 2 --device cuda-emulated"
                                         " --mutant rng-not-restored --json");
  ASSERT_EQ(runRc, 1) << runOut;
  EXPECT_FALSE(nlohmann::json::parse(runOut)["bitwise_equal"].get<bool>());
  const auto [rc, out] = ckptcheck(
      "verify --device cuda-emulated --mutant rng-not-restored --cases 10 --seed 1 --no-catalogue --shrink-trials 0"
      " --json");
  ASSERT_EQ(rc, 1) << out;
  const auto j = nlohmann::json::parse(out);
  EXPECT_EQ(j["device"], "cuda-emulated");
  EXPECT_EQ(j["mutant"], "rng-not-restored");
  EXPECT_FALSE(j["ok"].get<bool>());
}

// Without a GPU (CI) --device cuda is an infrastructure error (exit 3) with one line saying so, never a silent
// fallback to the CPU; with one, it runs.
TEST(CliDevice, cudaRunsOnAGpuAndIsRefusedWithoutOne) {
  const auto info = nlohmann::json::parse(ckptcheck("info --json").second);
  const bool gpu = info.contains("cuda") && info["cuda"].value("devices", 0) > 0;
  const auto [rc, out] =
      ckptcheck("run --case " + catalogue("tiny") + " --policy recursive --device cuda --json", !gpu);
  if (gpu) {
    ASSERT_EQ(rc, 0) << out;
    EXPECT_EQ(nlohmann::json::parse(out)["device"], "cuda");
  } else {
    EXPECT_EQ(rc, 3) << out;
    EXPECT_NE(out.find("--device cuda: "), std::string::npos) << out;
    EXPECT_EQ(std::count(out.begin(), out.end(), '\n'), 1) << out;
  }
}

TEST(CliEngine, helpOnBothSubcommands) {
  EXPECT_EQ(ckptcheck("plan --help").first, 0);
  EXPECT_EQ(ckptcheck("run --help").first, 0);
}

}  // namespace
}  // namespace ckpt
