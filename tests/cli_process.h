// Runs the real ckptcheck binary as a child process, as CI does: exit code, stdout, stderr, with a timeout.
// The binary is $CKPTCHECK, else the one this test was built beside (CKPT_CKPTCHECK_BINARY).
#pragma once
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <optional>
#include <sstream>
#include <string>
#include <unistd.h>
#include <vector>

#include "harness/validate/runner.h"
#include "tests/test_util.h"

namespace ckpt::test {

inline std::string ckptcheckBinary() {
  if (const char* e = std::getenv("CKPTCHECK"); e && *e) return e;
#ifdef CKPT_CKPTCHECK_BINARY
  return CKPT_CKPTCHECK_BINARY;
#else
  return "ckptcheck";
#endif
}

struct CliResult {
  ProcessResult process;
  std::string out, err;
  int exitCode() const { return process.started && !process.timedOut && process.signal == 0 ? process.exitCode : -1; }
};

// A scratch folder under the system temp dir, removed with the object.
class ScratchDir {
 public:
  explicit ScratchDir(const std::string& tag) {
    std::string tmpl = (std::filesystem::temp_directory_path() / ("ckpt-" + tag + "-XXXXXX")).string();
    if (!mkdtemp(tmpl.data())) throw std::runtime_error("mkdtemp failed");
    path_ = tmpl;
  }
  ~ScratchDir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  const std::filesystem::path& path() const { return path_; }

 private:
  std::filesystem::path path_;
};

// Runs ckptcheck ARGS with extra environment variables, in `cwd` (the caller's when empty).
inline CliResult runCkptcheck(const std::vector<std::string>& args, const std::map<std::string, std::string>& env = {},
                              const std::filesystem::path& cwd = {}, double timeoutSeconds = 120) {
  ScratchDir io("cli");
  std::vector<std::string> argv = {ckptcheckBinary()};
  argv.insert(argv.end(), args.begin(), args.end());
  // The child inherits environment and working directory; tests run one command at a time.
  std::map<std::string, std::optional<std::string>> saved;
  for (const auto& [k, v] : env) {
    const char* old = std::getenv(k.c_str());
    saved[k] = old ? std::optional<std::string>(old) : std::nullopt;
    setenv(k.c_str(), v.c_str(), 1);
  }
  const auto here = std::filesystem::current_path();
  if (!cwd.empty()) std::filesystem::current_path(cwd);
  CliResult r;
  r.process = runProcess(argv, (io.path() / "out").string(), (io.path() / "err").string(), timeoutSeconds);
  if (!cwd.empty()) std::filesystem::current_path(here);
  for (const auto& [k, v] : saved) {
    if (v) setenv(k.c_str(), v->c_str(), 1);
    else unsetenv(k.c_str());
  }
  r.out = readFile(io.path() / "out");
  r.err = readFile(io.path() / "err");
  return r;
}

}  // namespace ckpt::test
