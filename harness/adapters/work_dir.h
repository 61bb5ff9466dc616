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

}  // namespace ckpt
