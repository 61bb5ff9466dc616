// Where `validate` puts the case and run directories it deletes again (one per case, confirm and shrink step):
// thousands of small files a minute. On ext4, creating files right after deleting others makes each inode
// allocation scan past the recently freed ones, which cost a third of a PyTorch validate's time and more of a
// numpy one's; a tmpfs has no such cost. So they go to a fresh directory under $CKPT_SCRATCH, else /dev/shm when
// it is a writable tmpfs with 512 MiB free, else (and with --keep-work, which keeps them for people to read)
// under OUT/work.
#pragma once
#include <filesystem>

namespace ckpt {

class WorkDir {
 public:
  // keep: OUT/work, kept; otherwise a new directory of its own, removed by the destructor.
  WorkDir(const std::filesystem::path& outDir, bool keep);
  ~WorkDir();
  WorkDir(const WorkDir&) = delete;
  WorkDir& operator=(const WorkDir&) = delete;
  const std::filesystem::path& path() const { return path_; }
  // Removes it now (unless kept); the destructor then has nothing to do.
  void remove();

 private:
  std::filesystem::path path_;
  bool keep_;
};

// OUT belongs to one `validate` at a time: two runs given the same --out would write and read the same files
// (OUT/work, OUT/case, the reports), so one run's verdict could be read from the other's tensors. The constructor
// creates OUT and takes an exclusive flock on OUT/.ckptcheck.lock for the object's life (the kernel drops it when
// the process ends, however it ends, so a lock is never stale); a second run finds it held and is refused at once
// with one line, an InputError (exit 2: the command line names a directory in use). Not inherited by the
// processes validate starts (O_CLOEXEC). Also refuses an OUT that exists and is not a directory.
class OutDirLock {
 public:
  explicit OutDirLock(const std::filesystem::path& outDir);
  ~OutDirLock();
  OutDirLock(const OutDirLock&) = delete;
  OutDirLock& operator=(const OutDirLock&) = delete;

 private:
  int fd_ = -1;
};

}  // namespace ckpt
