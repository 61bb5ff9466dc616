#include "harness/validate/work_dir.h"

#include <fcntl.h>
#include <linux/magic.h>
#include <sys/file.h>
#include <sys/vfs.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include <cstdint>
#include <cstdlib>
#include <string>
#include <system_error>
#include <vector>

#include "common/input_error.h"

namespace ckpt {
namespace fs = std::filesystem;

namespace {

// A fresh directory under `root`, or "" when it cannot be made there.
fs::path makeUnder(const fs::path& root) {
  std::string templ = (root / "ckptcheck-work-XXXXXX").string();
  std::vector<char> buf(templ.begin(), templ.end());
  buf.push_back('\0');
  if (!mkdtemp(buf.data())) return {};
  return fs::path(buf.data());
}

// A container's /dev/shm may be 64 MB: a case that did not fit would fail as an adapter fault, so a tmpfs with
// less free than this is passed over (random and shrunk cases take kilobytes; a catalogue case a few MB).
constexpr uint64_t kLeastFreeTmpfsBytes = uint64_t{512} << 20;

bool isRoomyWritableTmpfs(const char* dir) {
  struct statfs s{};
  return statfs(dir, &s) == 0 && s.f_type == TMPFS_MAGIC && access(dir, W_OK | X_OK) == 0 &&
         static_cast<uint64_t>(s.f_bavail) * static_cast<uint64_t>(s.f_bsize) >= kLeastFreeTmpfsBytes;
}

}  // namespace

WorkDir::WorkDir(const fs::path& outDir, bool keep) : keep_(keep) {
  if (!keep) {
    if (const char* env = std::getenv("CKPT_SCRATCH"); env && *env) path_ = makeUnder(env);
    else if (isRoomyWritableTmpfs("/dev/shm")) path_ = makeUnder("/dev/shm");
  }
  if (path_.empty()) path_ = outDir / "work";
}

void WorkDir::remove() {
  if (keep_) return;
  std::error_code ec;
  fs::remove_all(path_, ec);
}

WorkDir::~WorkDir() { remove(); }

OutDirLock::OutDirLock(const fs::path& outDir) {
  const std::string quoted = "--out '" + outDir.string() + "'";
  std::error_code ec;
  if (fs::exists(outDir, ec) && !fs::is_directory(outDir, ec))
    throw InputError(quoted + ": exists and is not a directory");
  fs::create_directories(outDir, ec);
  if (ec) throw InputError(quoted + ": cannot create the directory: " + ec.message());
  const fs::path lock = outDir / ".ckptcheck.lock";
  fd_ = open(lock.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
  if (fd_ < 0) throw InputError(quoted + ": cannot open " + lock.string() + ": " + std::strerror(errno));
  if (flock(fd_, LOCK_EX | LOCK_NB) != 0) {
    const int e = errno;
    close(fd_);
    fd_ = -1;
    if (e == EWOULDBLOCK)
      throw InputError(quoted + ": another ckptcheck validate is using it (it holds " + lock.string() +
                       "); give each run its own --out");
    throw InputError(quoted + ": cannot lock " + lock.string() + ": " + std::strerror(e));
  }
}

OutDirLock::~OutDirLock() {
  if (fd_ >= 0) close(fd_);  // drops the flock
}

}  // namespace ckpt
