// The fork server (harness/user_model/fork_server.h) gives what runProcess of `python SCRIPT ARGS...` gives: the exit
// code, the signal, the timeout with the run's whole group killed, stdout and stderr in their files, argv, a fresh
// interpreter's state in every run; and when the server cannot serve, the same results from fresh processes.
#include <gtest/gtest.h>

#include <csignal>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "harness/validate/adapter.h"
#include "harness/user_model/fork_server.h"
#include "harness/validate/runner.h"
#include "tests/cli_process.h"
#include "tests/test_util.h"

namespace ckpt {
namespace {

namespace fs = std::filesystem;
using test::readFile;

void write(const fs::path& p, const std::string& text) { std::ofstream(p) << text; }

// A preloaded module (json, through the preloaded script's import) marked by one run must be unmarked in the next:
// each run is a child of the untouched parent, not of the previous run.
const char* kScript = R"(import json, os, sys, time
if __name__ == "__main__":
    what = sys.argv[1]
    print("argv", sys.argv[1:], "main", __name__)
    print("stderr line", file=sys.stderr)
    if what == "mark":
        print("marked before:", hasattr(json, "_ckpt_mark"))
        json._ckpt_mark = 1
    elif what == "exit":
        sys.exit(int(sys.argv[2]))
    elif what == "raise":
        raise RuntimeError("boom")
    elif what == "signal":
        os.kill(os.getpid(), 9)
    elif what == "stdin":
        print("stdin:", repr(sys.stdin.read()))
    elif what in ("escape", "escape-and-hang"):
        pid = os.fork()
        if pid == 0:  # a grandchild that leaves the run's group and session: only the subreaper finds it
            os.setsid()
            time.sleep(600)
            os._exit(0)
        with open(sys.argv[2], "w") as f:
            f.write(str(pid))
        if what == "escape-and-hang":
            time.sleep(600)
    elif what == "hang":
        if os.fork() == 0:  # a grandchild in the run's group, which the timeout must kill too
            with open(sys.argv[2], "w") as f:
                f.write(str(os.getpid()))
            time.sleep(600)
        time.sleep(600)
)";

bool alive(pid_t pid) { return ::kill(pid, 0) == 0; }

struct ForkServerTest : ::testing::Test {
  test::ScratchDir scratch{"fork-server"};
  fs::path d = scratch.path();
  fs::path script = d / "driver.py";
  std::vector<std::string> preload;
  PythonForkServer server;
  void SetUp() override {
    write(script, kScript);
    preload = {"--preload-script", script.string()};
  }
  ProcessResult run(const std::vector<std::string>& args, const std::string& tag, double timeout = 60) {
    std::vector<std::string> argv = {script.string()};
    argv.insert(argv.end(), args.begin(), args.end());
    return server.run(preload, argv, (d / (tag + ".out")).string(), (d / (tag + ".err")).string(), timeout);
  }
};

TEST_F(ForkServerTest, runsTheScriptAsMainWithItsArgvAndFiles) {
  const ProcessResult r = run({"mark", "x y"}, "a");
  EXPECT_TRUE(server.lastForked());
  EXPECT_TRUE(r.ok()) << r.describe() << readFile(d / "a.err");
  EXPECT_EQ(readFile(d / "a.out"), "argv ['mark', 'x y'] main __main__\nmarked before: False\n");
  EXPECT_EQ(readFile(d / "a.err"), "stderr line\n");
  const ProcessResult s = run({"stdin"}, "s");
  EXPECT_TRUE(s.ok());
  EXPECT_NE(readFile(d / "s.out").find("stdin: ''"), std::string::npos) << readFile(d / "s.out");
}

TEST_F(ForkServerTest, everyRunStartsFromTheUntouchedParent) {
  ASSERT_TRUE(run({"mark"}, "a").ok());
  ASSERT_TRUE(run({"mark"}, "b").ok());
  EXPECT_TRUE(server.lastForked());
  EXPECT_NE(readFile(d / "b.out").find("marked before: False"), std::string::npos) << readFile(d / "b.out");
}

TEST_F(ForkServerTest, reportsExitCodesExceptionsAndSignals) {
  EXPECT_EQ(run({"exit", "3"}, "e").exitCode, 3);
  const ProcessResult raised = run({"raise"}, "r");
  EXPECT_EQ(raised.exitCode, 1);
  EXPECT_NE(readFile(d / "r.err").find("RuntimeError: boom"), std::string::npos);
  const ProcessResult killed = run({"signal"}, "k");
  EXPECT_EQ(killed.signal, SIGKILL);
  EXPECT_FALSE(killed.ok());
  EXPECT_TRUE(server.lastForked());
  EXPECT_TRUE(run({"exit", "0"}, "z").ok());  // the server outlives its runs' deaths
  EXPECT_TRUE(server.lastForked());
}

TEST_F(ForkServerTest, timeoutKillsTheRunsWholeGroupAndTheServerGoesOn) {
  const fs::path pidFile = d / "grandchild.pid";
  const ProcessResult r = run({"hang", pidFile.string()}, "h", 2);
  EXPECT_TRUE(r.timedOut);
  EXPECT_TRUE(server.lastForked());
  EXPECT_GE(r.seconds, 2.0);
  EXPECT_LT(r.seconds, 10.0);
  const pid_t grandchild = std::stoi(readFile(pidFile));
  for (int i = 0; i < 100 && alive(grandchild); ++i) ::usleep(20000);  // reaped by init once killed
  EXPECT_FALSE(alive(grandchild));
  EXPECT_TRUE(run({"exit", "0"}, "after").ok());
  EXPECT_TRUE(server.lastForked());
}

// A grandchild that called setsid() is in no group a kill reaches; ckptcheck, the child subreaper of what it starts
// (harness/validate/runner.h), ends it when the run ends, and when the run times out.
TEST_F(ForkServerTest, aRunsDescendantThatLeftItsSessionEndsWithTheRun) {
  for (const std::string mode : {"escape", "escape-and-hang"}) {
    SCOPED_TRACE(mode);
    const fs::path pidFile = d / (mode + ".pid");
    const ProcessResult r = run({mode, pidFile.string()}, mode, mode == "escape" ? 60 : 2);
    EXPECT_TRUE(server.lastForked());
    EXPECT_EQ(r.timedOut, mode != "escape") << r.describe();
    const pid_t grandchild = std::stoi(readFile(pidFile));
    EXPECT_FALSE(alive(grandchild)) << "pid " << grandchild << " outlived its run";
    if (alive(grandchild)) ::kill(grandchild, SIGKILL);
  }
  EXPECT_TRUE(run({"exit", "0"}, "after").ok());
  EXPECT_TRUE(server.lastForked());
}

TEST_F(ForkServerTest, aServerThatCannotStartFallsBackToFreshProcesses) {
  preload = {"--no-such-argument"};  // fork_server.py exits at once
  EXPECT_EQ(run({"exit", "4"}, "e").exitCode, 4);
  EXPECT_FALSE(server.lastForked());
  EXPECT_TRUE(run({"mark"}, "m").ok());
  EXPECT_FALSE(server.lastForked());
  EXPECT_EQ(readFile(d / "m.out"), "argv ['mark'] main __main__\nmarked before: False\n");
}

TEST_F(ForkServerTest, forkCanBeSwitchedOff) {
  ::setenv("CKPT_ADAPTER_FORK", "0", 1);
  const ProcessResult r = run({"exit", "5"}, "e");
  ::unsetenv("CKPT_ADAPTER_FORK");
  EXPECT_EQ(r.exitCode, 5);
  EXPECT_FALSE(server.lastForked());
  EXPECT_EQ(run({"exit", "5"}, "f").exitCode, 5);
  EXPECT_TRUE(server.lastForked());
}

}  // namespace
}  // namespace ckpt
