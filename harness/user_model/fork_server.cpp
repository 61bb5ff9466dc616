#include "harness/user_model/fork_server.h"

#include <cstdlib>
#include <filesystem>

#include <nlohmann/json.hpp>

#include "harness/validate/adapter.h"

namespace ckpt {
namespace fs = std::filesystem;
using json = nlohmann::json;

namespace {

// The server answers within the run's own timeout (it kills a run that outlives it) plus, on its first request, its
// own imports; this margin only catches a server that stopped answering.
constexpr double kServerMarginSeconds = 120;

bool forkDisabled() {
  const char* env = std::getenv("CKPT_ADAPTER_FORK");
  return env && std::string(env) == "0";
}

}  // namespace

ProcessResult PythonForkServer::run(const std::vector<std::string>& preloadArgs,
                                    const std::vector<std::string>& scriptArgv, const std::string& stdoutPath,
                                    const std::string& stderrPath, double timeoutSeconds) {
  const auto fresh = [&] {
    lastForked_ = false;
    std::vector<std::string> argv = {adapterPython()};
    argv.insert(argv.end(), scriptArgv.begin(), scriptArgv.end());
    return runProcess(argv, stdoutPath, stderrPath, timeoutSeconds);
  };
  if (broken_ || forkDisabled()) return fresh();
  std::string error;
  if (!serve_.running() || preload_ != preloadArgs) {
    const fs::path script = fs::path(adapterSourceDir()) / "harness" / "user_model" / "common" / "fork_server.py";
    std::vector<std::string> argv = {adapterPython(), script.string()};
    argv.insert(argv.end(), preloadArgs.begin(), preloadArgs.end());
    // The server's own stderr (a preload that failed) goes to the first run's stderr file.
    if (!serve_.start(argv, stderrPath, error)) {
      broken_ = true;
      return fresh();
    }
    preload_ = preloadArgs;
  }
  const json request = {
      {"argv", scriptArgv}, {"stdout", stdoutPath}, {"stderr", stderrPath}, {"timeout", timeoutSeconds}};
  std::string reply;
  ProcessResult r;
  // The server may still be importing (a first request): its margin covers that, and the run's own time and
  // timeout count from the fork, as a fresh process's count from its start.
  if (!serve_.request(request.dump(), reply, timeoutSeconds + kServerMarginSeconds, error)) {
    broken_ = true;  // it hung or died (ServeProcess killed its group): every later run is a fresh process
    return fresh();
  }
  r.started = true;
  // The run's child has been reaped: whatever it started outside its group (setsid) was re-parented to ckptcheck.
  reapStrays();
  const json j = json::parse(reply, nullptr, false);
  if (j.is_object() && j.contains("seconds") && j["seconds"].is_number()) r.seconds = j["seconds"].get<double>();
  if (j.is_object() && j.contains("exit") && j["exit"].is_number_integer()) {
    r.exitCode = j["exit"].get<int>();
  } else if (j.is_object() && j.contains("signal") && j["signal"].is_number_integer()) {
    r.signal = j["signal"].get<int>();
  } else if (j.is_object() && j.value("timed_out", false)) {
    r.timedOut = true;
  } else {
    broken_ = true;  // it could not fork, or answered something else: this run and every later one fresh
    serve_.stop();
    return fresh();
  }
  lastForked_ = true;
  return r;
}

PythonForkServer& pythonForkServer() {
  static PythonForkServer server;
  return server;
}

}  // namespace ckpt
