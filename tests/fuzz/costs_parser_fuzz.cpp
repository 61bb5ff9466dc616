// libFuzzer target: the chain-costs reader (harness/engine/costs_file.cpp, the format of harness/engine/COSTS.md)
// on arbitrary bytes, through the same depth-limited JSON parse as `plan --costs`. Every input must be accepted or
// refused with an InputError; an accepted file must become a ChainCost that store-all, uniform and segments plan
// (segments at store-all's peak and at half of it, or an InputError there), with a placement whose saved bytes
// are not negative. Anything else (another exception, a crash, an ASan/UBSan report, a hang) is a finding.
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "cases/user_file.h"
#include "harness/engine/costs_file.h"
#include "harness/engine/costs_plans.h"
#include "harness/engine/plan.h"
#include "harness/engine/policy.h"

namespace {

[[noreturn]] void finding(const std::string& what) {
  std::fprintf(stderr, "costs file: %s\n", what.c_str());
  std::abort();
}

void planAll(const ckpt::ChainCosts& c) {
  const ckpt::ChainCost cost = ckpt::chainCostOf(c);
  const ckpt::CostsPlanRow all = ckpt::planCostsPolicy(c, cost, "store-all");
  const int64_t peak = all.plan.peakActivationBytes;
  if (peak < 0 || all.plan.flops.forward < 0 || all.plan.flops.backward < 0)
    finding("store-all plans negative figures");
  if (!all.saved || all.saved->total < 0) finding("store-all's placement predicts no or negative saved bytes");
  ckpt::planCostsPolicy(c, cost, "uniform:k=2");
  for (const int64_t budget : {peak, peak / 2 + 1}) {
    try {
      const ckpt::CostsPlanRow r = ckpt::planCostsPolicy(c, cost, "segments:budget=" + std::to_string(budget));
      if (r.plan.peakActivationBytes > budget) finding("segments peaks over its budget");
    } catch (const ckpt::InputError&) {  // infeasible at that budget
    }
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  ckpt::ChainCosts c;
  try {
    c = ckpt::parseChainCosts(ckpt::parseUserJson(text, "fuzz"), "fuzz");
  } catch (const ckpt::InputError&) {
    return 0;
  } catch (const std::exception& e) {
    finding(std::string("the reader threw a non-InputError: ") + e.what());
  }
  try {
    planAll(c);
  } catch (const ckpt::InputError&) {
    return 0;  // the planner's own checks (FLOPs past 64 bits)
  } catch (const std::exception& e) {
    finding(std::string("planning threw a non-InputError: ") + e.what());
  }
  return 0;
}
