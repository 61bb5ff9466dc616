// Helpers the test files share, so each has one home: where the source tree is (the catalogue, test data), whole
// file reads, and a shell command's exit status and output. Header-only, no library to link.
// tests/cli_process.h builds on it to run the ckptcheck binary with a timeout and separate stdout and stderr.
#pragma once
#include <sys/wait.h>

#include <array>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <utility>

namespace ckpt::test {

// $CKPT_SOURCE_DIR (CTest sets it), else the tree the test was built from (CKPT_TEST_SOURCE_DIR), else ".".
inline std::filesystem::path sourceDir() {
  if (const char* e = std::getenv("CKPT_SOURCE_DIR"); e && *e) return e;
#ifdef CKPT_TEST_SOURCE_DIR
  return CKPT_TEST_SOURCE_DIR;
#else
  return ".";
#endif
}

// A GoogleTest name for a parameter with dashes ("rng-not-restored" -> "rng_not_restored"; names take letters,
// digits and underscores): INSTANTIATE_TEST_SUITE_P's name generator returns it for its p.param.
inline std::string testName(std::string s) {
  for (char& c : s)
    if (c == '-') c = '_';
  return s;
}

inline std::filesystem::path catalogueDir() { return sourceDir() / "cases" / "catalog"; }
// A catalogue case file by name: catalogueCase("tiny") is cases/catalog/tiny.json.
inline std::filesystem::path catalogueCase(const std::string& name) { return catalogueDir() / (name + ".json"); }

inline std::string readFile(const std::filesystem::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// Runs `cmd` with /bin/sh; returns its exit status (-1 when it did not exit normally) and its stdout, with
// stderr joined when `joinStderr` (else discarded).
inline std::pair<int, std::string> runShell(const std::string& cmd, bool joinStderr = true) {
  std::string out;
  FILE* f = popen((cmd + (joinStderr ? " 2>&1" : " 2>/dev/null")).c_str(), "r");
  if (!f) return {-1, ""};
  std::array<char, 4096> buf;
  size_t n;
  while ((n = fread(buf.data(), 1, buf.size(), f)) > 0) out.append(buf.data(), n);
  const int status = pclose(f);
  return {WIFEXITED(status) ? WEXITSTATUS(status) : -1, out};
}

}  // namespace ckpt::test
