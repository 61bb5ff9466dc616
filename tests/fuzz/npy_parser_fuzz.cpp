// libFuzzer target: the .npy reader (harness/validate/npy.cpp), which reads every tensor an adapter writes — the
// least trusted input ckptcheck has. Every input must parse or be refused with an NpyError (an adapter fault);
// a parsed array's bytes must match its shape, and converting it to float or double must succeed or be refused
// with an NpyError. See tests/fuzz/README.md.
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "harness/validate/npy.h"

namespace {
[[noreturn]] void finding(const std::string& what) {
  std::fprintf(stderr, "npy reader: %s\n", what.c_str());
  std::abort();
}
}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::vector<unsigned char> file(data, data + size);
  ckpt::NpyArray a;
  try {
    a = ckpt::parseNpy(file, "fuzz.npy");
  } catch (const ckpt::NpyError&) {
    return 0;
  } catch (const std::exception& e) {
    finding(std::string("threw a non-NpyError: ") + e.what());
  }
  if (static_cast<int64_t>(a.bytes.size()) != a.count() * ckpt::npyItemSize(a.type))
    finding("data size " + std::to_string(a.bytes.size()) + " does not match shape " + ckpt::shapeText(a.shape));
  for (bool integral : {false, true}) {
    try {
      (void)ckpt::npyValues<double>(a, "fuzz.npy", integral);
    } catch (const ckpt::NpyError&) {
    } catch (const std::exception& e) {
      finding(std::string("npyValues<double> threw a non-NpyError: ") + e.what());
    }
    try {
      (void)ckpt::npyValues<float>(a, "fuzz.npy", integral);
    } catch (const ckpt::NpyError&) {
    } catch (const std::exception& e) {
      finding(std::string("npyValues<float> threw a non-NpyError: ") + e.what());
    }
  }
  return 0;
}
