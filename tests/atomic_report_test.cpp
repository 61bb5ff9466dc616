// Report files are written atomically (harness/atomic_file.h): a write that fails or a process killed in the
// middle of one leaves the previous report whole. The failure is a real one: a file-size limit (RLIMIT_FSIZE,
// `ulimit -f`, what a full disk or quota does to a writer) kills the writing process with SIGXFSZ partway
// through the file. The same kill destroys a report written in place with std::ofstream, which is what the first
// test shows, so the others would fail if the writers went back to that.
#include <gtest/gtest.h>

#include <csignal>
#include <cstdio>
#include <fstream>
#include <string>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include "harness/atomic_file.h"
#include "tests/cli_process.h"

namespace ckpt::test {
namespace {

namespace fs = std::filesystem;

const std::string kPrevious = "<previous report: must survive an interrupted write>\n";
constexpr rlim_t kLimit = 4096;  // bytes a process may write to one file

// Runs `write` in a child whose file-size limit is kLimit; returns the child's wait status.
template <class F>
int inLimitedChild(F write) {
  const pid_t pid = fork();
  if (pid == 0) {
    const rlimit lim{kLimit, kLimit};
    setrlimit(RLIMIT_FSIZE, &lim);
    signal(SIGXFSZ, SIG_DFL);  // the default: the process is killed when it writes past the limit
    try {
      write();
    } catch (...) {
      _exit(3);
    }
    _exit(0);
  }
  int status = 0;
  waitpid(pid, &status, 0);
  return status;
}

TEST(AtomicReport, inPlaceWriteIsDestroyedByTheSameKill) {
  ScratchDir dir("atomic");
  const fs::path report = dir.path() / "report.json";
  std::ofstream(report) << kPrevious;
  const int status = inLimitedChild([&] { std::ofstream(report) << std::string(4 * kLimit, 'x'); });
  ASSERT_TRUE(WIFSIGNALED(status) && WTERMSIG(status) == SIGXFSZ) << status;
  EXPECT_NE(readFile(report), kPrevious);  // truncated, then cut off at the limit
}

TEST(AtomicReport, killedMidWriteLeavesThePreviousFileWhole) {
  ScratchDir dir("atomic");
  const fs::path report = dir.path() / "report.json";
  std::ofstream(report) << kPrevious;
  const int status = inLimitedChild([&] { writeFileAtomic(report, std::string(4 * kLimit, 'x')); });
  ASSERT_TRUE(WIFSIGNALED(status) && WTERMSIG(status) == SIGXFSZ) << status;
  EXPECT_EQ(readFile(report), kPrevious);
}

TEST(AtomicReport, aFailedWriteLeavesThePreviousFileAndNoTemporary) {
  ScratchDir dir("atomic");
  const fs::path report = dir.path() / "report.json";
  std::ofstream(report) << kPrevious;
  // SIGXFSZ ignored: the write returns EFBIG instead, and writeFileAtomic must clean up and throw.
  const int status = inLimitedChild([&] {
    signal(SIGXFSZ, SIG_IGN);
    writeFileAtomic(report, std::string(4 * kLimit, 'x'));
  });
  ASSERT_TRUE(WIFEXITED(status)) << status;
  EXPECT_EQ(WEXITSTATUS(status), 3);  // it threw
  EXPECT_EQ(readFile(report), kPrevious);
  int files = 0;
  for (const auto& e : fs::directory_iterator(dir.path())) files += e.is_regular_file();
  EXPECT_EQ(files, 1) << "a temporary file was left behind";
}

// The real binary: verify's JUnit report, with the process killed by the limit while writing it.
TEST(AtomicReport, verifyKilledWhileWritingJUnitKeepsThePreviousReport) {
  ScratchDir dir("atomic");
  const std::string verify = ckptcheckBinary() + " verify --cases 3 --no-catalogue --threads 1 --junit ";
  // Unlimited, the report is larger than the limit used below (1 block: 512 bytes in dash, 1 KiB in shells that
  // count KiB), so the limit does hit it.
  ASSERT_EQ(std::system((verify + (dir.path() / "full.xml").string() + " >/dev/null 2>&1").c_str()), 0);
  ASSERT_GT(fs::file_size(dir.path() / "full.xml"), 1024u);

  const fs::path report = dir.path() / "verify.xml";
  std::ofstream(report) << kPrevious;
  const std::string cmd = "ulimit -f 1; exec " + verify + report.string() + " >/dev/null 2>&1";
  const int status = std::system(("/bin/sh -c '" + cmd + "'").c_str());
  EXPECT_NE(status, 0);
  EXPECT_EQ(readFile(report), kPrevious);
}

}  // namespace
}  // namespace ckpt::test
