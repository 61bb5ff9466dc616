#include "harness/validate/runner.h"

#include <fcntl.h>
#include <poll.h>
#include <spawn.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <set>
#include <thread>

#include "common/input_error.h"

extern char** environ;

namespace ckpt {
namespace {

using Clock = std::chrono::steady_clock;

double since(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }

std::vector<char*> cArgv(const std::vector<std::string>& argv) {
  std::vector<char*> v;
  for (const auto& a : argv) v.push_back(const_cast<char*>(a.c_str()));
  v.push_back(nullptr);
  return v;
}

// Waits for pid until the deadline; returns true when it ended (status set).
bool waitUntil(pid_t pid, int& status, Clock::time_point deadline) {
  auto nap = std::chrono::milliseconds(1);
  for (;;) {
    const pid_t r = waitpid(pid, &status, WNOHANG);
    if (r == pid) return true;
    if (r < 0 && errno != EINTR) return true;  // already reaped: nothing to wait for
    if (Clock::now() >= deadline) return false;
    std::this_thread::sleep_for(nap);
    if (nap < std::chrono::milliseconds(20)) nap *= 2;
  }
}

Clock::duration toDuration(double seconds) {
  return std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(seconds));
}

// SIGTERM to the group, SIGKILL after `grace` seconds; reaps pid.
void killGroup(pid_t pid, int& status, double grace) {
  kill(-pid, SIGTERM);
  const bool ended = waitUntil(pid, status, Clock::now() + toDuration(grace));
  kill(-pid, SIGKILL);  // the child if it ignored SIGTERM, and whatever it left running in its group
  if (!ended) waitUntil(pid, status, Clock::now() + std::chrono::seconds(5));
}

void fillResult(ProcessResult& r, int status) {
  if (WIFEXITED(status)) r.exitCode = WEXITSTATUS(status);
  else if (WIFSIGNALED(status)) r.signal = WTERMSIG(status);
}

// The children ckptcheck started and still owns (runProcess's while it runs, each running ServeProcess); every
// other child of ckptcheck is an adopted orphan (reapStrays).
std::mutex ownedMutex;
std::set<pid_t>& owned() {
  // Never destroyed: the fork server, a function-local static made before it, stops (and disowns) at exit.
  static auto* pids = new std::set<pid_t>;
  return *pids;
}

// The child has been reaped: what it left behind outside its group is a stray now.
void disown(pid_t pid) {
  {
    const std::lock_guard<std::mutex> lock(ownedMutex);
    owned().erase(pid);
  }
  reapStrays();
}

// Once, before the first child: orphans of what ckptcheck starts come to ckptcheck, not to init.
void becomeSubreaper() {
  static const bool once = [] {
    prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0);
    return true;
  }();
  (void)once;
}

// The processes whose parent is ckptcheck, from /proc/PID/stat ("PID (COMM) STATE PPID ..."; COMM may hold
// spaces and parentheses, so the fields after the last ')').
std::vector<pid_t> childrenOfThisProcess() {
  std::vector<pid_t> kids;
  const pid_t self = getpid();
  std::error_code ec;
  for (const auto& e : std::filesystem::directory_iterator("/proc", ec)) {
    const std::string name = e.path().filename().string();
    if (name.empty() || name.find_first_not_of("0123456789") != std::string::npos) continue;
    std::ifstream in(e.path() / "stat");
    std::string stat;
    if (!std::getline(in, stat)) continue;
    const size_t close = stat.rfind(')');
    if (close == std::string::npos) continue;
    char state = 0;
    long ppid = 0;
    if (std::sscanf(stat.c_str() + close + 1, " %c %ld", &state, &ppid) == 2 && ppid == self)
      kids.push_back(static_cast<pid_t>(std::atol(name.c_str())));
  }
  return kids;
}

struct SpawnSetup {
  posix_spawn_file_actions_t actions;
  posix_spawnattr_t attr;
  SpawnSetup() {
    posix_spawn_file_actions_init(&actions);
    posix_spawnattr_init(&attr);
    posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETPGROUP | POSIX_SPAWN_SETSIGDEF | POSIX_SPAWN_SETSIGMASK);
    posix_spawnattr_setpgroup(&attr, 0);
    sigset_t none, def;
    sigemptyset(&none);
    posix_spawnattr_setsigmask(&attr, &none);
    sigemptyset(&def);
    sigaddset(&def, SIGPIPE);
    sigaddset(&def, SIGTERM);
    sigaddset(&def, SIGINT);
    posix_spawnattr_setsigdefault(&attr, &def);
  }
  ~SpawnSetup() {
    posix_spawn_file_actions_destroy(&actions);
    posix_spawnattr_destroy(&attr);
  }
  // posix_spawnp, the child owned from its first instant (a reapStrays on another thread must not take it for a
  // stray); 0 or the error number.
  int spawn(const std::vector<std::string>& argv, pid_t& pid) {
    becomeSubreaper();
    auto args = cArgv(argv);
    const std::lock_guard<std::mutex> lock(ownedMutex);
    const int rc = posix_spawnp(&pid, args[0], &actions, &attr, args.data(), environ);
    if (rc == 0) owned().insert(pid);
    return rc;
  }
  void output(int fd, const std::string& path) {
    if (path.empty()) posix_spawn_file_actions_addopen(&actions, fd, "/dev/null", O_WRONLY, 0);
    else posix_spawn_file_actions_addopen(&actions, fd, path.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0644);
  }
};

}  // namespace

std::vector<std::string> splitCommandLine(const std::string& line) {
  std::vector<std::string> words;
  std::string cur;
  bool inWord = false;
  for (size_t i = 0; i < line.size(); ++i) {
    const char c = line[i];
    if (c == '\'') {
      const size_t end = line.find('\'', i + 1);
      if (end == std::string::npos) throw InputError("adapter command: unterminated ' quote in: " + line);
      cur += line.substr(i + 1, end - i - 1);
      i = end;
      inWord = true;
    } else if (c == '"') {
      size_t j = i + 1;
      for (; j < line.size() && line[j] != '"'; ++j) {
        if (line[j] == '\\' && j + 1 < line.size() && std::strchr("\"\\$`", line[j + 1])) ++j;
        cur += line[j];
      }
      if (j >= line.size()) throw InputError("adapter command: unterminated \" quote in: " + line);
      i = j;
      inWord = true;
    } else if (c == '\\') {
      if (i + 1 < line.size()) cur += line[++i];
      inWord = true;
    } else if (c == ' ' || c == '\t' || c == '\n') {
      if (inWord) words.push_back(cur);
      cur.clear();
      inWord = false;
    } else {
      cur += c;
      inWord = true;
    }
  }
  if (inWord) words.push_back(cur);
  if (words.empty()) throw InputError("adapter command: empty");
  return words;
}

std::string ProcessResult::describe() const {
  if (!started) return "could not be started: " + startError;
  if (timedOut)
    return "timed out after " + std::to_string(static_cast<int>(seconds + 0.5)) + " s (process group killed)";
  if (signal) return "killed by signal " + std::to_string(signal) + " (" + strsignal(signal) + ")";
  return "exit code " + std::to_string(exitCode);
}

ProcessResult runProcess(const std::vector<std::string>& argv, const std::string& stdoutPath,
                         const std::string& stderrPath, double timeoutSeconds) {
  ProcessResult r;
  SpawnSetup s;
  posix_spawn_file_actions_addopen(&s.actions, 0, "/dev/null", O_RDONLY, 0);
  s.output(1, stdoutPath);
  s.output(2, stderrPath);
  pid_t pid;
  const auto t0 = Clock::now();
  const int rc = s.spawn(argv, pid);
  if (rc != 0) {
    r.startError = std::string(argv[0]) + ": " + std::strerror(rc);
    return r;
  }
  r.started = true;
  int status = 0;
  const auto deadline = t0 + toDuration(timeoutSeconds);
  if (!waitUntil(pid, status, deadline)) {
    r.timedOut = true;
    killGroup(pid, status, 2.0);
  } else {
    kill(-pid, SIGKILL);  // anything the adapter left running in its group
  }
  r.seconds = since(t0);
  fillResult(r, status);
  disown(pid);
  return r;
}

int reapStrays() {
  int ended = 0;
  // A stray that forks faster than it is killed could keep this going: a bound, far above any real tree.
  for (int round = 0; round < 64; ++round) {
    std::vector<pid_t> strays;
    {
      const std::lock_guard<std::mutex> lock(ownedMutex);
      for (const pid_t p : childrenOfThisProcess())
        if (!owned().count(p)) strays.push_back(p);
    }
    if (strays.empty()) break;
    for (const pid_t p : strays) kill(p, SIGKILL);
    for (const pid_t p : strays) {
      int status = 0;
      waitUntil(p, status, Clock::now() + std::chrono::seconds(5));
    }
    ended += static_cast<int>(strays.size());
  }
  return ended;
}

std::string fileTail(const std::string& path, size_t maxBytes) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return "";
  in.seekg(0, std::ios::end);
  const auto size = static_cast<size_t>(in.tellg());
  const size_t from = size > maxBytes ? size - maxBytes : 0;
  in.seekg(static_cast<std::streamoff>(from));
  std::string s(size - from, '\0');
  in.read(s.data(), static_cast<std::streamsize>(s.size()));
  return s;
}

ServeProcess::~ServeProcess() { stop(0.5); }

bool ServeProcess::start(const std::vector<std::string>& argv, const std::string& stderrPath, std::string& error) {
  stop(0.5);
  // A child that dies while we write must not take the harness with it.
  std::signal(SIGPIPE, SIG_IGN);
  int in[2], out[2];
  if (pipe2(in, O_CLOEXEC) != 0 || pipe2(out, O_CLOEXEC) != 0) {
    error = std::string("pipe: ") + std::strerror(errno);
    return false;
  }
  SpawnSetup s;
  posix_spawn_file_actions_adddup2(&s.actions, in[0], 0);
  posix_spawn_file_actions_adddup2(&s.actions, out[1], 1);
  s.output(2, stderrPath);
  pid_t pid;
  const int rc = s.spawn(argv, pid);
  close(in[0]);
  close(out[1]);
  if (rc != 0) {
    close(in[1]);
    close(out[0]);
    error = std::string(argv[0]) + ": " + std::strerror(rc);
    return false;
  }
  pid_ = pid;
  toChild_ = in[1];
  fromChild_ = out[0];
  buffer_.clear();
  return true;
}

bool ServeProcess::request(const std::string& line, std::string& reply, double timeoutSeconds, std::string& error) {
  if (pid_ <= 0) {
    error = "the serve process is not running";
    return false;
  }
  const std::string msg = line + "\n";
  for (size_t off = 0; off < msg.size();) {
    const ssize_t n = write(toChild_, msg.data() + off, msg.size() - off);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      error = std::string("writing the request failed: ") + std::strerror(errno);
      stop(0.5);
      return false;
    }
    off += static_cast<size_t>(n);
  }
  const auto deadline = Clock::now() + toDuration(timeoutSeconds);
  for (;;) {
    const size_t nl = buffer_.find('\n');
    if (nl != std::string::npos) {
      reply = buffer_.substr(0, nl);
      buffer_.erase(0, nl + 1);
      return true;
    }
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
    if (left <= 0) {
      error = "no reply within " + std::to_string(static_cast<int>(timeoutSeconds)) + " s (process group killed)";
      stop(0.0);
      return false;
    }
    pollfd p{fromChild_, POLLIN, 0};
    const int pr = poll(&p, 1, static_cast<int>(std::min<long long>(left, 1000)));
    if (pr < 0 && errno == EINTR) continue;
    if (pr <= 0) continue;
    char buf[4096];
    const ssize_t n = read(fromChild_, buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      stop(1.0);
      error = "the serve process closed its output (it exited or crashed)";
      return false;
    }
    buffer_.append(buf, static_cast<size_t>(n));
  }
}

void ServeProcess::stop(double graceSeconds) {
  if (toChild_ >= 0) close(toChild_);
  toChild_ = -1;
  if (pid_ > 0) {
    int status = 0;
    if (!waitUntil(pid_, status, Clock::now() + toDuration(graceSeconds))) killGroup(pid_, status, 1.0);
    else kill(-pid_, SIGKILL);
    disown(pid_);
  }
  pid_ = -1;
  if (fromChild_ >= 0) close(fromChild_);
  fromChild_ = -1;
  buffer_.clear();
}

}  // namespace ckpt
