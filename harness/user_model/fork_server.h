// Runs of the built-in Python drivers (harness/user_model/torch/user_model.py: a user model's plain and
// checkpointed runs, several per seed) forked from one interpreter that has imported torch, and the user model's
// installed imports, once (harness/user_model/common/fork_server.py): each run is a fresh child of an interpreter
// that never ran anything, with the result runProcess would give for `python SCRIPT ARGS...` (exit code, signal,
// timeout with its group killed), without the import's seconds (two for torch, more with transformers) on every
// run. CKPT_ADAPTER_FORK=0 runs each as a fresh process instead; so does every run after the server itself failed.
#pragma once
#include <string>
#include <vector>

#include "harness/validate/runner.h"

namespace ckpt {

class PythonForkServer {
 public:
  // preloadArgs: fork_server.py's own arguments (--preload-script FILE, --preload-imports-of FILE); a run with other
  // ones restarts the server. scriptArgv: the script and its arguments (no interpreter).
  ProcessResult run(const std::vector<std::string>& preloadArgs, const std::vector<std::string>& scriptArgv,
                    const std::string& stdoutPath, const std::string& stderrPath, double timeoutSeconds);
  // Whether the last run went through the server (false: a fresh process).
  bool lastForked() const { return lastForked_; }

 private:
  ServeProcess serve_;
  std::vector<std::string> preload_;  // the running server's
  bool broken_ = false;
  bool lastForked_ = false;
};

// The process's one server (the runs of one command share its imports).
PythonForkServer& pythonForkServer();

}  // namespace ckpt
