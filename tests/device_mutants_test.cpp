// The kill matrix on a device: every mutant of harness/mutants/ runs through the same executor and hooks on
// the emulated CUDA backend (`verify --mutant M --device cuda-emulated`), where the reference is the device's
// own store-all run, and is caught by the property its record names (Mutant::caughtBy) within a small case
// budget; the correct engine holds there over the same budget. tests/mutants_test.cpp is the CPU kill matrix with the
// full budget and seeds.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "harness/mutants/catalog.h"
#include "harness/verify/report.h"
#include "harness/verify/search.h"
#include "tests/test_util.h"

namespace ckpt {
namespace {

// Small enough to keep the emulated device quick, large enough that seed 1 catches every mutant (a change of
// the generators that needs more is a reason to look, not to raise this blindly).
constexpr int kBudget = 30;

VerifyOptions onEmulatedDevice(const std::string& mutant) {
  VerifyOptions o;
  o.cases = kBudget;
  o.seed = 1;
  o.mutant = mutant;
  o.catalogue = false;
  o.maxShrinkTrials = 0;
  o.device = Device::kCudaEmulated;
  return o;
}

std::vector<std::string> mutantNamesList() {
  std::vector<std::string> v;
  for (const auto& m : mutantCatalog()) v.push_back(m.name);
  return v;
}

class DeviceKillMatrix : public ::testing::TestWithParam<std::string> {};

TEST_P(DeviceKillMatrix, mutantIsCaughtOnTheEmulatedDevice) {
  const std::string name = GetParam();
  const VerifyReport r = runVerify(onEmulatedDevice(name));
  EXPECT_EQ(r.device, "cuda-emulated");
  EXPECT_EQ(r.mutant, name);
  ASSERT_TRUE(r.finding) << name << " survived " << r.randomCases << " random cases on cuda-emulated";
  EXPECT_EQ(r.finding->violation.property->id, findMutant(name)->caughtBy)
      << r.finding->violation.policy << ": " << r.finding->violation.message;
}

INSTANTIATE_TEST_SUITE_P(Catalogue, DeviceKillMatrix, ::testing::ValuesIn(mutantNamesList()),
                         [](const ::testing::TestParamInfo<std::string>& p) { return test::testName(p.param); });

TEST(DeviceKillMatrix, correctEngineHoldsOnTheEmulatedDevice) {
  const VerifyReport r = runVerify(onEmulatedDevice(""));
  EXPECT_FALSE(r.finding) << (r.finding ? toText(r, nullptr) : "");
  EXPECT_EQ(r.randomCases, kBudget);
  EXPECT_GT(r.policyRuns, 0);
}

}  // namespace
}  // namespace ckpt
