// libFuzzer target: policy strings (harness/engine/policy.cpp) on arbitrary bytes. Every string must be accepted
// or refused with an InputError; an accepted one must have a canonical form that is a fixed point, and must make
// a schedule on the tiny catalogue case that validates and plans (or be refused there with an InputError, as an
// optimal budget below the smallest feasible is). See tests/fuzz/README.md.
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "harness/engine/chain_cost.h"
#include "harness/engine/plan.h"
#include "harness/engine/policy.h"
#include "tests/fuzz/tiny_cost.h"

namespace {

using ckpt::fuzz::tinyCost;

[[noreturn]] void finding(const std::string& what, const std::string& text) {
  std::fprintf(stderr, "policy '%s': %s\n", text.c_str(), what.c_str());
  std::abort();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size > 256) return 0;  // policy strings are short; long ones only slow the search
  const std::string text(reinterpret_cast<const char*>(data), size);
  ckpt::PolicySpec p;
  try {
    p = ckpt::parsePolicy(text);
  } catch (const ckpt::InputError&) {
    return 0;
  } catch (const std::exception& e) {
    finding(std::string("parser threw a non-InputError: ") + e.what(), text);
  }
  try {
    if (ckpt::parsePolicy(p.text).text != p.text) finding("canonical form '" + p.text + "' is not a fixed point", text);
  } catch (const ckpt::InputError& e) {
    finding("canonical form '" + p.text + "' is refused: " + e.what(), text);
  }
  try {
    const ckpt::Schedule s = ckpt::makeSchedule(p, tinyCost());
    ckpt::validateSchedule(s, tinyCost());
    ckpt::planSchedule(s, tinyCost());
  } catch (const ckpt::InputError&) {
    return 0;
  } catch (const std::exception& e) {
    finding(std::string("schedule threw a non-InputError: ") + e.what(), text);
  }
  return 0;
}
