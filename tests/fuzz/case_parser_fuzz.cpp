// libFuzzer target: the case parser (cases/case_json.cpp) on arbitrary bytes. Every input must be accepted or
// refused with an InputError; an accepted case must print back as itself. Anything else — another exception,
// a crash, an ASan/UBSan report, a hang — is a finding. See tests/fuzz/README.md.
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "cases/case_json.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  ckpt::CaseSpec c;
  try {
    c = ckpt::parseCaseText(text, "fuzz");
  } catch (const ckpt::InputError&) {
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "case parser threw a non-InputError: %s\n", e.what());
    std::abort();
  }
  if (!(ckpt::parseCase(ckpt::caseToJson(c)) == c)) {
    std::fprintf(stderr, "accepted case does not print back as itself: %s\n", ckpt::caseToJson(c).dump().c_str());
    std::abort();
  }
  return 0;
}
