#include "distributed/launch/orphan_sweeper.h"

#include <fcntl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <string>

namespace ringlet::distributed {

namespace {

// Reads pids until "done" (the launcher ended normally and swept: nothing to do) or EOF (it
// was killed): then kills what is left of each worker's process group (a worker leads its
// own), waits for the workers to be gone and removes what they named. The outer shell exits at
// once (the launcher reaps it); the subshell lives on, reading fd 3.
constexpr const char* kScript =
    "exec 3<&0; ("
    "pids=''; while read -r p <&3; do [ \"$p\" = done ] && exit 0; pids=\"$pids $p\"; done; "
    "for p in $pids; do kill -9 -\"$p\" 2>/dev/null; done; "
    "for i in $(seq 100); do alive=''; "
    "for p in $pids; do kill -0 \"$p\" 2>/dev/null && alive=1; done; "
    "[ -z \"$alive\" ] && break; sleep 0.1; done; "
    "for p in $pids; do kill -0 \"$p\" 2>/dev/null || "
    "rm -f /dev/shm/ringlet-shm-\"$p\"-* /dev/shm/ringlet-ibemu-\"$p\"-*; done"
    ") </dev/null >/dev/null 2>&1 & exit 0";

}  // namespace

OrphanSweeper::OrphanSweeper() {
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
    char* const argv[] = {const_cast<char*>("sh"), const_cast<char*>("-c"),
                          const_cast<char*>(kScript), nullptr};
    ::execv("/bin/sh", argv);
    ::_exit(127);
  }
  ::close(fds[1]);
  int status = 0;
  ::waitpid(child, &status, 0);  // the outer shell only: it exits once the subshell runs
  fd_ = fds[0];
}

OrphanSweeper::~OrphanSweeper() {
  if (fd_ < 0) return;
  (void)!::send(fd_, "done\n", 5, MSG_NOSIGNAL);
  ::close(fd_);
}

void OrphanSweeper::watch(pid_t worker) {
  if (fd_ < 0) return;
  const std::string line = std::to_string(worker) + "\n";
  // A sweeper that is gone (killed) costs nothing but its sweep: no SIGPIPE.
  (void)!::send(fd_, line.data(), line.size(), MSG_NOSIGNAL);
}

}  // namespace ringlet::distributed
