#include "cases/user_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace ckpt {
namespace {

using nlohmann::json;

std::string sizeText(std::uintmax_t bytes) {
  return std::to_string(bytes) + " bytes" +
         (bytes >= (std::uintmax_t{1} << 20) ? " (" + std::to_string(bytes >> 20) + " MiB)" : "");
}

struct Fd {
  int fd;
  ~Fd() { ::close(fd); }
};

// Whether a container opens more than `limit` levels deep, counting brackets outside strings: one linear pass
// before the parse. (nlohmann's parser callback could count too, but its parser then scans the enclosing array
// at every object's end: 100,000 blocks took 5.5 s instead of 0.48, quadratic in the array's length.)
bool nestsDeeperThan(const std::string& text, int limit) {
  int depth = 0;
  bool inString = false, escaped = false;
  for (const char ch : text) {
    if (inString) {
      if (escaped) escaped = false;
      else if (ch == '\\') escaped = true;
      else if (ch == '"') inString = false;
    } else if (ch == '"') {
      inString = true;
    } else if (ch == '[' || ch == '{') {
      if (++depth > limit) return true;
    } else if (ch == ']' || ch == '}') {
      --depth;
    }
  }
  return false;
}

}  // namespace

std::string readUserFile(const std::string& path, const std::string& what, std::uintmax_t maxBytes) {
  const std::string origin = what + " '" + path + "'";
  auto refuse = [&](const std::string& why) { throw InputError(origin + ": " + why); };
  const Fd f{::open(path.c_str(), O_RDONLY | O_CLOEXEC)};
  if (f.fd < 0) refuse(std::string("cannot be read: ") + std::strerror(errno));
  struct stat st{};
  if (::fstat(f.fd, &st) != 0) refuse(std::string("cannot be read: ") + std::strerror(errno));
  if (S_ISDIR(st.st_mode)) refuse("is a directory");
  const bool regular = S_ISREG(st.st_mode);
  const auto size = static_cast<std::uintmax_t>(st.st_size);
  if (regular && size > maxBytes)
    refuse("is " + sizeText(size) + ", more than this reader takes, " + sizeText(maxBytes));
  std::string text;
  if (regular) text.reserve(size);
  // A pipe or a device has no size: read it up to the cap (endless input is refused, not waited out).
  char buf[1 << 16];
  for (;;) {
    const ssize_t n = ::read(f.fd, buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) refuse(std::string("cannot be read: ") + std::strerror(errno));
    if (n == 0) break;
    text.append(buf, static_cast<size_t>(n));
    if (text.size() > maxBytes) refuse("gives more than this reader takes, " + sizeText(maxBytes));
  }
  return text;
}

json parseUserJson(const std::string& text, const std::string& origin) {
  if (nestsDeeperThan(text, kMaxJsonDepth))
    throw InputError(origin + ": nested deeper than " + std::to_string(kMaxJsonDepth) + " levels");
  try {
    return json::parse(text);
  } catch (const json::exception& e) {
    // parse_error, or out_of_range for a number beyond double (1e999); the message quotes the last token
    // read, which can be as long as the file, and may hold a line break.
    std::string why = clipped(std::string(e.what()), 160);
    for (char& ch : why)
      if (ch == '\n' || ch == '\r') ch = ' ';
    throw InputError(origin + ": malformed JSON: " + why);
  }
}

json readUserJson(const std::string& path, const std::string& what, std::uintmax_t maxBytes) {
  return parseUserJson(readUserFile(path, what, maxBytes), what + " '" + path + "'");
}

std::string clipped(const std::string& s, size_t limit) {
  if (s.size() <= limit) return s;
  size_t cut = limit;
  while (cut > 0 && (static_cast<unsigned char>(s[cut]) & 0xC0) == 0x80) --cut;  // not inside a UTF-8 character
  return s.substr(0, cut) + "...(" + std::to_string(s.size()) + " bytes)";
}

std::string clipped(const json& v, size_t limit) {
  if (v.is_string())
    return json(clipped(v.get<std::string>(), limit)).dump(-1, ' ', false, json::error_handler_t::replace);
  return clipped(v.dump(-1, ' ', false, json::error_handler_t::replace), limit);
}

}  // namespace ckpt
