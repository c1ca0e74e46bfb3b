// Both ends of the orphan sweeper: the launcher's (start it, tell it the workers) and the
// sweeper's own, which runs before main in the program re-executed with kSweeperEnv set.
#include "distributed/launch/orphan_sweeper.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include "transport/shared_objects.h"

extern char** environ;

namespace ringlet::distributed {
namespace {

constexpr char kSweeperEnv[] = "RINGLET_ORPHAN_SWEEPER";

// Alive and not a zombie (whether anyone reaps a zombie is not the sweeper's business).
bool running(pid_t pid) {
  std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
  std::string line;
  if (!std::getline(stat, line)) return false;
  const std::size_t paren = line.rfind(')');
  return paren != std::string::npos && paren + 2 < line.size() && line[paren + 2] != 'Z';
}

// What the launcher said: "g PID" / "p PID" (watch; g: it leads its own process group),
// "r PID" (reaped by its parent: its group id may be reused, never kill it), "done" (ending
// normally). Returns whether "done" came before the end of the input.
bool read_watch_list(int in, std::vector<pid_t>& pids, std::vector<pid_t>& groups) {
  std::string pending;
  char buffer[512];
  for (ssize_t n; (n = ::read(in, buffer, sizeof buffer)) != 0;) {
    if (n < 0) {
      if (errno == EINTR) continue;
      return false;
    }
    pending.append(buffer, static_cast<std::size_t>(n));
    for (std::size_t end; (end = pending.find('\n')) != std::string::npos;) {
      const std::string line = pending.substr(0, end);
      pending.erase(0, end + 1);
      if (line == "done") return true;
      if (line.size() < 3) continue;
      const pid_t pid = static_cast<pid_t>(std::atol(line.c_str() + 2));
      if (pid <= 0) continue;
      if (line[0] == 'r') {
        groups.erase(std::remove(groups.begin(), groups.end(), pid), groups.end());
      } else {
        pids.push_back(pid);
        if (line[0] == 'g') groups.push_back(pid);
      }
    }
  }
  return false;
}

// The sweeper's whole life: read, kill the groups left if the launcher was killed, wait (at
// most 10 s) for the watched to be gone, remove what they named.
void sweep(int in) {
  std::vector<pid_t> pids, groups;
  if (!read_watch_list(in, pids, groups)) {
    for (const pid_t group : groups) ::kill(-group, SIGKILL);
  }
  for (int i = 0; i < 100 && std::any_of(pids.begin(), pids.end(), running); ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  const auto theirs = [&](pid_t pid, const std::filesystem::path&) {
    return std::find(pids.begin(), pids.end(), pid) != pids.end() && !running(pid);
  };
  for (const char* kind : transport::kSharedObjectKinds) {
    transport::sweep_shared_objects(kind, theirs);
  }
}

// The program as its own sweeper: its standard input is the launcher's socket. It forks once
// (the parent exits at once, reaped by the launcher) and sweeps; main never runs.
[[gnu::constructor]] void run_if_sweeper() {
  const char* mode = std::getenv(kSweeperEnv);
  struct stat in {};
  if (mode == nullptr || std::strcmp(mode, "1") != 0 || ::fstat(STDIN_FILENO, &in) != 0 ||
      !S_ISSOCK(in.st_mode)) {
    return;
  }
  const pid_t child = ::fork();
  if (child != 0) ::_exit(child < 0 ? 1 : 0);
  sweep(STDIN_FILENO);
  ::_exit(0);
}

// This program's environment with kSweeperEnv=1 (before the fork: the child only execs).
std::vector<char*> sweeper_environment(std::string& entry) {
  entry = std::string(kSweeperEnv) + "=1";
  std::vector<char*> env;
  for (char** e = environ; *e != nullptr; ++e) {
    if (std::strncmp(*e, kSweeperEnv, sizeof kSweeperEnv - 1) != 0) env.push_back(*e);
  }
  env.push_back(entry.data());
  env.push_back(nullptr);
  return env;
}

}  // namespace

OrphanSweeper::OrphanSweeper() {
  std::string entry;
  std::vector<char*> env = sweeper_environment(entry);
  int fds[2];
  if (::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, fds) != 0) return;
  const pid_t child = ::fork();
  if (child < 0) {
    ::close(fds[0]);
    ::close(fds[1]);
    return;
  }
  if (child == 0) {  // async-signal-safe calls only until exec
    ::setsid();      // not in the launcher's process group: a Ctrl-C there does not reach it
    ::dup2(fds[1], STDIN_FILENO);
    const int null = ::open("/dev/null", O_RDWR);
    if (null >= 0) {
      ::dup2(null, STDOUT_FILENO);
      ::dup2(null, STDERR_FILENO);
    }
    ::close_range(3, ~0U, 0);
    char* const argv[] = {const_cast<char*>("ringlet-orphan-sweeper"), nullptr};
    ::execve("/proc/self/exe", argv, env.data());
    ::_exit(127);
  }
  ::close(fds[1]);
  int status = 0;
  ::waitpid(child, &status, 0);  // the re-executed program only: it exits once its child sweeps
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
    ::close(fds[0]);  // it did not start: no sweeper
    return;
  }
  fd_ = fds[0];
}

OrphanSweeper::~OrphanSweeper() {
  if (fd_ < 0) return;
  (void)!::send(fd_, "done\n", 5, MSG_NOSIGNAL);
  ::close(fd_);
}

void OrphanSweeper::reaped(pid_t worker) {
  if (fd_ < 0) return;
  const std::string line = "r " + std::to_string(worker) + "\n";
  (void)!::send(fd_, line.data(), line.size(), MSG_NOSIGNAL);
}

void OrphanSweeper::watch(pid_t worker, bool leads_group) {
  if (fd_ < 0) return;
  const std::string line = (leads_group ? "g " : "p ") + std::to_string(worker) + "\n";
  // A sweeper that is gone (killed) costs nothing but its sweep: no SIGPIPE.
  (void)!::send(fd_, line.data(), line.size(), MSG_NOSIGNAL);
}

}  // namespace ringlet::distributed
