// libFuzzer target: schedule files (schedule:FILE, harness/policies/schedule_file.cpp) on arbitrary bytes, through
// the same depth-limited JSON parse as the file reader. Every input must be accepted or refused with an
// InputError; an accepted schedule for 3 blocks must validate and plan on the tiny catalogue case or be refused
// there with an InputError (the validator naming the instruction). Anything else (another exception, a crash, a
// sanitizer report, a hang) is a finding.
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "cases/user_file.h"
#include "harness/engine/chain_cost.h"
#include "harness/engine/plan.h"
#include "harness/engine/policy.h"
#include "tests/fuzz/tiny_cost.h"

namespace {

using ckpt::fuzz::tinyCost;

[[noreturn]] void finding(const std::string& what) {
  std::fprintf(stderr, "schedule file: %s\n", what.c_str());
  std::abort();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  ckpt::Schedule s;
  try {
    s = ckpt::scheduleFromJson(ckpt::parseUserJson(text, "fuzz"));
  } catch (const ckpt::InputError&) {
    return 0;
  } catch (const std::exception& e) {
    finding(std::string("the reader threw a non-InputError: ") + e.what());
  }
  if (s.layers != tinyCost().layers()) return 0;  // fileSchedule refuses another length before validating
  try {
    ckpt::validateSchedule(s, tinyCost());
    const ckpt::Plan p = ckpt::planSchedule(s, tinyCost());
    if (p.peakActivationBytes < 0 || p.flops.recompute < 0) finding("planned negative figures");
  } catch (const ckpt::InputError&) {
    return 0;
  } catch (const std::exception& e) {
    finding(std::string("validating or planning threw a non-InputError: ") + e.what());
  }
  return 0;
}
