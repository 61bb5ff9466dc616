// Report files are written atomically: the content goes to a temporary file in the same folder, is flushed to
// disk, and is renamed over the destination. A reader, or a run interrupted at any moment, sees the previous
// complete file or the new complete file, never a half-written one.
#pragma once
#include <cerrno>
#include <cstring>
#include <fcntl.h>
#include <filesystem>
#include <stdexcept>
#include <string>
#include <sys/stat.h>  // fchmod, lstat
#include <unistd.h>

#include "common/input_error.h"

namespace ckpt {

// The destination must be a regular file or a new path: a rename over a symbolic link, a device or a pipe
// (`--placement /dev/stdout`, a link to /proc/self/fd/1) would replace it with a regular file, not write through
// it. Refused, as a missing folder is, with an InputError of one line.
inline void checkWritableDestination(const std::filesystem::path& path) {
  struct stat st{};
  if (::lstat(path.c_str(), &st) != 0) {
    if (errno == ENOENT) return;  // a new path; its folder is mkstemp's to find
    throw InputError("cannot write '" + path.string() + "': " + std::strerror(errno));
  }
  if (S_ISREG(st.st_mode)) return;
  const char* what = S_ISLNK(st.st_mode)                          ? "a symbolic link"
                     : S_ISDIR(st.st_mode)                        ? "a directory"
                     : S_ISCHR(st.st_mode) || S_ISBLK(st.st_mode) ? "a device"
                                                                  : "not a regular file";
  throw InputError("cannot write '" + path.string() + "': it is " + what +
                   ", which would be replaced, not written to; give a regular file or a new path");
}

inline void writeFileAtomic(const std::filesystem::path& path, const std::string& content) {
  namespace fs = std::filesystem;
  checkWritableDestination(path);
  const fs::path dir = path.has_parent_path() ? path.parent_path() : fs::path(".");
  std::string tmp = (dir / ("." + path.filename().string() + ".tmp-XXXXXX")).string();
  const int fd = mkstemp(tmp.data());
  if (fd < 0 && (errno == ENOENT || errno == ENOTDIR))
    throw InputError("cannot write '" + path.string() + "': no such directory '" + dir.string() + "'");
  if (fd < 0) throw std::runtime_error("cannot write '" + path.string() + "': " + std::strerror(errno));
  auto fail = [&](const char* what) {
    const std::string why = std::strerror(errno);
    ::close(fd);
    ::unlink(tmp.c_str());
    throw std::runtime_error("cannot write '" + path.string() + "': " + what + ": " + why);
  };
  for (size_t done = 0; done < content.size();) {
    const ssize_t n = ::write(fd, content.data() + done, content.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) fail("write");
    done += static_cast<size_t>(n);
  }
  if (::fchmod(fd, 0644) != 0) fail("chmod");  // mkstemp makes it 0600; a report is for everyone to read
  if (::fsync(fd) != 0) fail("fsync");
  if (::close(fd) != 0) {
    ::unlink(tmp.c_str());
    throw std::runtime_error("cannot write '" + path.string() + "': close: " + std::strerror(errno));
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0) {
    const std::string why = std::strerror(errno);
    ::unlink(tmp.c_str());
    throw std::runtime_error("cannot write '" + path.string() + "': rename: " + why);
  }
}

}  // namespace ckpt
