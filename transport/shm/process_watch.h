// ProcessWatch: whether another process has exited, for transports whose peer is a process on
// this host (a dead peer must become an error, not a wait until the deadline).
#pragma once

#include <sys/types.h>

namespace ringlet::transport {

// Watches another process for exit. Uses a pidfd (exit is seen even while the process is an
// unreaped zombie, and a recycled pid cannot fool it); falls back to kill(pid, 0) plus the
// /proc state where pidfds are missing. A watcher on our own pid (peers that are threads of this
// process) or on pid 0 (unknown) never reports exit.
class ProcessWatch {
 public:
  ProcessWatch() = default;
  explicit ProcessWatch(pid_t pid);
  ~ProcessWatch();
  ProcessWatch(ProcessWatch&& other) noexcept;
  ProcessWatch& operator=(ProcessWatch&& other) noexcept;
  ProcessWatch(const ProcessWatch&) = delete;
  ProcessWatch& operator=(const ProcessWatch&) = delete;

  bool exited() const;
  pid_t pid() const { return pid_; }

 private:
  pid_t pid_ = 0;
  int pidfd_ = -1;
  bool same_process_ = true;
};

}  // namespace ringlet::transport
