#include "harness/adapters/work_dir.h"

#include <linux/magic.h>
#include <sys/vfs.h>
#include <unistd.h>

#include <cstdint>
#include <cstdlib>
#include <string>
#include <system_error>
#include <vector>

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
  struct statfs s {};
  return statfs(dir, &s) == 0 && s.f_type == TMPFS_MAGIC && access(dir, W_OK | X_OK) == 0 &&
         static_cast<uint64_t>(s.f_bavail) * static_cast<uint64_t>(s.f_bsize) >= kLeastFreeTmpfsBytes;
}

}  // namespace

WorkDir::WorkDir(const fs::path& outDir, bool keep) : keep_(keep) {
  if (!keep) {
    if (const char* env = std::getenv("CKPT_SCRATCH"); env && *env)
      path_ = makeUnder(env);
    else if (isRoomyWritableTmpfs("/dev/shm"))
      path_ = makeUnder("/dev/shm");
  }
  if (path_.empty()) path_ = outDir / "work";
}

void WorkDir::remove() {
  if (keep_) return;
  std::error_code ec;
  fs::remove_all(path_, ec);
}

WorkDir::~WorkDir() { remove(); }

}  // namespace ckpt
