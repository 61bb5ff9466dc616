// A broken adapter is told apart from a real finding: `ckptcheck validate` driven through
// tests/fake-adapters/fault_adapter.py, which breaks one thing at a time (exits non-zero, crashes, hangs, writes
// nothing, garbage, wrong shapes or dtypes, NaN). Each fault must end in the verdict "adapter-fault" naming the
// case and the problem, exit code 3, a complete validate.json, and never a crash or a hang of ckptcheck.
// Needs a Python with numpy (the fake adapter wraps the numpy adapter); skipped without one.
#include <gtest/gtest.h>

#include <chrono>
#include <csignal>
#include <nlohmann/json.hpp>

#include "harness/validate/adapter.h"
#include "tests/cli_process.h"

namespace ckpt::test {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

// A Python that imports numpy: the one ckptcheck would use for built-in adapters, else Debian's.
const std::string& pythonWithNumpy() {
  static const std::string py = [] {
    std::vector<std::string> candidates = {adapterPython(), "/usr/bin/python3", "python3"};
    for (const auto& c : candidates) {
      if (runProcess({c, "-c", "import numpy"}, "", "", 60).ok()) return c;
    }
    return std::string();
  }();
  return py;
}

std::string fakeAdapter(const std::string& fault) {
  return shellQuote(pythonWithNumpy()) + " " +
         shellQuote((fs::path(sourceDir()) / "tests" / "fake-adapters" / "fault_adapter.py").string()) + " " + fault;
}

struct Fault {
  std::string name;
  int exitCode;          // 3: adapter fault; 1: a finding; 0: holds
  std::string mentions;  // in the fault's (or finding's) message
  bool runFault = true;  // the fault happens running a case (so the report names one), not in the query
  double timeout = 30;   // --adapter-timeout: short where the fault is a hang
};

std::ostream& operator<<(std::ostream& os, const Fault& f) { return os << f.name; }

struct Outcome {
  CliResult cli;
  json report;
  double seconds = 0;
};

Outcome validate(const std::string& adapterCmd, const fs::path& dir, double timeout,
                 const std::map<std::string, std::string>& env = {}) {
  Outcome o;
  const auto t0 = std::chrono::steady_clock::now();
  o.cli =
      runCkptcheck({"validate", "--adapter-cmd", adapterCmd, "--cases", "2", "--seed", "7", "--max-blocks", "2",
                    "--max-steps", "2", "--adapter-timeout", std::to_string(timeout), "--out", (dir / "out").string()},
                   env, dir, 300);
  o.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  const std::string text = readFile(dir / "out" / "validate.json");
  if (!text.empty()) o.report = json::parse(text, nullptr, false);
  return o;
}

class AdapterFault : public ::testing::TestWithParam<Fault> {
 protected:
  void SetUp() override {
    if (pythonWithNumpy().empty()) GTEST_SKIP() << "no Python with numpy for the fake adapter";
  }
};

TEST_P(AdapterFault, isReportedAsAnAdapterFaultNeverACrash) {
  const Fault& f = GetParam();
  ScratchDir dir("fault");
  const Outcome o = validate(fakeAdapter(f.name), dir.path(), f.timeout);
  const std::string all = "stdout:\n" + o.cli.out + "\nstderr:\n" + o.cli.err;
  ASSERT_TRUE(o.cli.process.started);
  ASSERT_EQ(o.cli.process.signal, 0) << "ckptcheck was killed: " << o.cli.process.describe() << "\n" << all;
  ASSERT_FALSE(o.cli.process.timedOut) << all;
  EXPECT_EQ(o.cli.exitCode(), f.exitCode) << all;
  EXPECT_EQ(o.cli.err.find("internal error"), std::string::npos) << all;
  ASSERT_TRUE(o.report.is_object()) << "validate.json missing or not JSON\n" << all;
  EXPECT_EQ(o.report.value("exit_code", -1), f.exitCode);
  if (f.exitCode == 3) {
    EXPECT_EQ(o.report.value("result", ""), "adapter-fault");
    ASSERT_TRUE(o.report.contains("fault") && o.report["fault"].is_object()) << o.report.dump(2);
    const std::string message = o.report["fault"].value("message", "");
    EXPECT_NE(message.find(f.mentions), std::string::npos) << "expected '" << f.mentions << "' in: " << message;
    EXPECT_LT(message.size(), 8000u) << "the message quotes a bounded tail of the adapter's output";
    if (f.runFault) {
      EXPECT_TRUE(o.report["fault"].contains("case_file")) << "the fault names its case: " << o.report["fault"].dump(2);
    }
    EXPECT_NE(o.cli.out.find("adapter fault: "), std::string::npos) << all;
  } else if (f.exitCode == 1) {
    EXPECT_EQ(o.report.value("result", ""), "finding");
    ASSERT_FALSE(o.report["findings"].empty());
    EXPECT_NE(o.report["findings"][0].value("message", "").find(f.mentions), std::string::npos) << o.report.dump(2);
  } else {
    EXPECT_EQ(o.report.value("result", ""), "holds") << o.report.dump(2);
  }
}

const Fault kFaults[] = {
    {"none", 0, "", false},
    {"exit-nonzero", 3, "run (plain) exit code 1"},
    {"crash", 3, "killed by signal 11"},
    {"hang-capabilities", 3, "capabilities query: timed out after", false, 3},
    {"capabilities-garbage", 3, "capabilities: malformed JSON", false},
    {"capabilities-protocol", 3, "adapter speaks protocol 99", false},
    {"writes-nothing", 3, "meta.json: missing"},
    {"missing-step", 3, "step1: missing"},
    {"garbage-meta", 3, "meta.json: malformed JSON"},
    {"garbage-npy", 3, "loss.npy"},
    {"truncated-npy", 3, ".npy"},
    {"wrong-shape", 3, "shape"},
    {"wrong-dtype", 3, "<f4"},
    // Not finite in the plain run: nothing can be judged (NaN equals NaN bit for bit), said before check 2 compares.
    {"nan", 3, "plain run is not finite: step 0 grad "},
    {"inf", 3, "plain run is not finite: step 0 loss: +inf"},
    {"serve-crash", 3, "serve (plain)"},
    {"serve-garbage", 3, "the reply is not"},
    {"serve-hang", 3, "serve (plain)", true, 3},
    {"flood-stderr", 3, "run (plain) exit code 1"},
    // Finite in the plain run, NaN with checkpointing: the framework's checkpointing broke the gradient. That is
    // what validate exists to find, so it is a finding (exit 1), not an adapter fault.
    {"nan-checkpoint", 1, "differs from the plain run"},
};

INSTANTIATE_TEST_SUITE_P(FakeAdapters, AdapterFault, ::testing::ValuesIn(kFaults),
                         [](const ::testing::TestParamInfo<Fault>& i) {
                           std::string n = i.param.name;
                           for (char& c : n)
                             if (c == '-') c = '_';
                           return n;
                         });

// A hanging adapter is killed at --adapter-timeout with everything it started (its process group), and the run
// ends promptly with an adapter fault.
TEST(AdapterFaults, aHangingAdapterIsKilledWithItsProcessGroupAtTheTimeout) {
  if (pythonWithNumpy().empty()) GTEST_SKIP() << "no Python with numpy for the fake adapter";
  ScratchDir dir("hang");
  const fs::path pidFile = dir.path() / "grandchild.pid";
  const Outcome o = validate(fakeAdapter("hang"), dir.path(), 3, {{"FAULT_ADAPTER_PIDFILE", pidFile.string()}});
  EXPECT_EQ(o.cli.exitCode(), 3) << o.cli.out << o.cli.err;
  ASSERT_TRUE(o.report.is_object());
  EXPECT_NE(o.report["fault"].value("message", "").find("timed out after"), std::string::npos) << o.report.dump(2);
  EXPECT_LT(o.seconds, 60) << "3 s timeout, 2 s grace, a capabilities query: it must not take longer";
  const std::string pid = readFile(pidFile);
  ASSERT_FALSE(pid.empty()) << "the fake adapter did not start its grandchild";
  // Reaped by init or a zombie at most: no longer running.
  const std::string stat = readFile(fs::path("/proc") / pid / "stat");
  const bool running = !stat.empty() && stat.find(") Z") == std::string::npos;
  EXPECT_FALSE(running) << "grandchild " << pid << " survived the timeout: " << stat;
  if (running) kill(std::stoi(pid), SIGKILL);
}

TEST(AdapterFaults, anAdapterThatCannotBeStartedIsAnAdapterFault) {
  ScratchDir dir("nostart");
  const Outcome o = validate("/nonexistent/adapter --flag", dir.path(), 10);
  EXPECT_EQ(o.cli.exitCode(), 3) << o.cli.out << o.cli.err;
  ASSERT_TRUE(o.report.is_object()) << o.cli.out << o.cli.err;
  EXPECT_NE(o.report["fault"].value("message", "").find("could not be started"), std::string::npos) << o.report.dump(2);
}

}  // namespace
}  // namespace ckpt::test
