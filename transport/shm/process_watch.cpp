// ProcessWatch through a pidfd, or kill(pid, 0) and /proc where pidfds are missing.
#include "transport/shm/process_watch.h"

#include <poll.h>
#include <signal.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <fstream>
#include <string>
#include <utility>

namespace ringlet::transport {

ProcessWatch::ProcessWatch(pid_t pid) : pid_(pid), same_process_(pid == getpid()) {
#ifdef SYS_pidfd_open
  if (!same_process_ && pid > 0) pidfd_ = static_cast<int>(syscall(SYS_pidfd_open, pid, 0));
#endif
}

ProcessWatch::~ProcessWatch() {
  if (pidfd_ >= 0) close(pidfd_);
}

ProcessWatch::ProcessWatch(ProcessWatch&& other) noexcept
    : pid_(other.pid_),
      pidfd_(std::exchange(other.pidfd_, -1)),
      same_process_(other.same_process_) {}

ProcessWatch& ProcessWatch::operator=(ProcessWatch&& other) noexcept {
  if (this != &other) {
    if (pidfd_ >= 0) close(pidfd_);
    pid_ = other.pid_;
    pidfd_ = std::exchange(other.pidfd_, -1);
    same_process_ = other.same_process_;
  }
  return *this;
}

bool ProcessWatch::exited() const {
  if (same_process_ || pid_ <= 0) return false;
  if (pidfd_ >= 0) {
    pollfd p{pidfd_, POLLIN, 0};
    return poll(&p, 1, 0) > 0 && (p.revents & (POLLIN | POLLHUP | POLLERR)) != 0;
  }
  // Fallback: kill(pid, 0) still succeeds on a zombie, so also read its state from /proc.
  if (kill(pid_, 0) != 0 && errno == ESRCH) return true;
  std::ifstream stat("/proc/" + std::to_string(pid_) + "/stat");
  std::string line;
  if (!std::getline(stat, line)) return true;
  const auto paren = line.rfind(')');  // the command name may contain spaces and parentheses
  if (paren == std::string::npos || paren + 2 >= line.size()) return false;
  const char state = line[paren + 2];
  return state == 'Z' || state == 'X';
}

}  // namespace ringlet::transport
