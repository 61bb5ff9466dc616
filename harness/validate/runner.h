// Running an adapter: a child process in its own process group (so a timeout kills everything it started),
// stdin from /dev/null or a pipe, stdout and stderr to files or a pipe. Two shapes:
//  - runProcess: one command to completion (the `capabilities` query and per-case `run`);
//  - ServeProcess: a long-lived `serve` child answering one JSON line per request (PROTOCOL.md), which saves
//    the interpreter start-up (a second or more for PyTorch or JAX) on every case.
#pragma once
#include <sys/types.h>

#include <string>
#include <vector>

#include "harness/text_format.h"

namespace ckpt {

// Splits a command line as a POSIX shell would for words: whitespace separates, '...' is literal, "..." allows
// \" \\ \$ \` escapes, a backslash outside quotes escapes the next character. No expansion of any kind.
// Throws InputError on an unterminated quote or an empty command.
std::vector<std::string> splitCommandLine(const std::string& line);
// shellQuote / shellJoin (harness/text_format.h) quote words so splitCommandLine (and a shell) reads them back.

struct ProcessResult {
  bool started = false;
  std::string startError;  // errno text when the program could not be started
  int exitCode = -1;       // when it exited
  int signal = 0;          // when a signal ended it
  bool timedOut = false;
  double seconds = 0;
  bool ok() const { return started && !timedOut && signal == 0 && exitCode == 0; }
  std::string describe() const;  // "exit code 2", "killed by signal 9", "timed out after 120 s"
};

// Runs argv to completion with stdout and stderr appended to the given files (empty: /dev/null). On timeout the
// process group gets SIGTERM, then SIGKILL two seconds later.
ProcessResult runProcess(const std::vector<std::string>& argv, const std::string& stdoutPath,
                         const std::string& stderrPath, double timeoutSeconds);

// Descendants that leave the process group (setsid(), a daemon's double fork) escape a group kill. So the first
// process this file starts makes ckptcheck a child subreaper (prctl PR_SET_CHILD_SUBREAPER): every orphan of what
// it started is re-parented to ckptcheck instead of init, and reapStrays() kills and reaps each child of
// ckptcheck that no runProcess or ServeProcess owns, round after round (a stray's own children are re-parented to
// ckptcheck in turn), until none is left. Called when every run ends or times out, when a serve process stops,
// and by the fork server after each run (harness/user_model/fork_server.h). Returns how many it ended.
int reapStrays();

// The last `maxBytes` of a text file, for error messages ("" when missing).
std::string fileTail(const std::string& path, size_t maxBytes = 2000);

class ServeProcess {
 public:
  ServeProcess() = default;
  ~ServeProcess();
  ServeProcess(const ServeProcess&) = delete;
  ServeProcess& operator=(const ServeProcess&) = delete;

  // Starts argv with a pipe on stdin and stdout; stderr appends to stderrPath. Returns false with `error` set
  // when it cannot start.
  bool start(const std::vector<std::string>& argv, const std::string& stderrPath, std::string& error);
  bool running() const { return pid_ > 0; }
  // Writes `line` + '\n' and reads one line back within the timeout. On failure (timeout, end of output, the
  // child gone) returns false with `error` set, and the child is stopped.
  bool request(const std::string& line, std::string& reply, double timeoutSeconds, std::string& error);
  // Closes stdin (the child's cue to exit), waits up to `graceSeconds`, then kills the group.
  void stop(double graceSeconds = 2.0);

 private:
  pid_t pid_ = -1;
  int toChild_ = -1;
  int fromChild_ = -1;
  std::string buffer_;
};

}  // namespace ckpt
