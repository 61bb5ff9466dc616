// libFuzzer target: the placement reader of `validate --plan` (harness/user_model/plan_check.cpp, placement.json of
// harness/engine/COSTS.md) on arbitrary bytes, through the same depth-limited JSON parse. Every input must be
// accepted or refused with an InputError; an accepted placement must satisfy what the reader promises: a batch in
// [1, 2^20], one name, one forward-call count and one saved-bytes count per block, counts within 2^53, a total
// that is the sum of its parts. Anything else (another exception, a crash, a sanitizer report, a hang) is a finding.
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "cases/user_file.h"
#include "harness/user_model/plan_check.h"
#include "harness/engine/costs_file.h"

namespace {

[[noreturn]] void finding(const std::string& what) {
  std::fprintf(stderr, "placement file: %s\n", what.c_str());
  std::abort();
}

void checkAccepted(const ckpt::PlacementFile& p) {
  if (p.batchSize < 1 || p.batchSize > ckpt::kMaxCostsBatch)
    finding("accepted batch_size " + std::to_string(p.batchSize));
  const size_t n = p.blocks.size();
  if (n == 0 || p.savedByBlock.size() != n || p.forwardCalls.size() != n) finding("accepted mismatched block arrays");
  __int128 sum = p.savedBefore + p.savedAfter;
  for (size_t i = 0; i < n; ++i) {
    if (p.forwardCalls[i] != 1 && p.forwardCalls[i] != 2)
      finding("accepted forward_calls " + std::to_string(p.forwardCalls[i]));
    if (p.savedByBlock[i] < 0 || p.savedByBlock[i] > ckpt::kMaxCostsCount) finding("accepted an unbounded count");
    sum += p.savedByBlock[i];
  }
  if (sum != p.savedBytes) finding("accepted a saved_bytes that is not the sum of its parts");
  if (p.timeOverhead && !(*p.timeOverhead >= 0)) finding("accepted a negative time_overhead");
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  ckpt::PlacementFile p;
  try {
    p = ckpt::parsePlacementFile(ckpt::parseUserJson(text, "fuzz"), "fuzz");
  } catch (const ckpt::InputError&) {
    return 0;
  } catch (const std::exception& e) {
    finding(std::string("the reader threw a non-InputError: ") + e.what());
  }
  checkAccepted(p);
  return 0;
}
