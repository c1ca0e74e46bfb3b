#include "distributed/launch/orphan_sweeper.h"

#include <fcntl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <string>

#include "transport/shared_objects.h"

namespace ringlet::distributed {

namespace {

// Reads "g PID" / "p PID" (watch; g: it leads its own process group), "r PID" (reaped by its
// parent: its group id may be reused, never kill it) until "done" (the launcher or rank 0 is
// ending normally) or EOF (it was killed). Killed: it kills what is left of the watched process
// groups. Either way it waits (at most 10 s) until the watched are gone (a zombie counts as
// gone: whether anyone reaps it is not the sweeper's business) and removes the shared objects
// they named (transport/shared_objects.h; nothing, after a clean end). The outer shell exits at
// once (its parent reaps it); the subshell lives on, reading fd 3.
std::string sweeper_script() {
  std::string remove = "rm -f";
  for (const char* kind : transport::kSharedObjectKinds) {
    remove += std::string(" /dev/shm/") + kind + "\"$p\"-*";
  }
  return "exec 3<&0; ("
         "up() { s=$(sed -n 's/.*) \\(.\\).*/\\1/p' /proc/\"$1\"/stat 2>/dev/null); "
         "[ -n \"$s\" ] && [ \"$s\" != Z ]; }; "
         "pids=''; groups=''; ended=''; while read -r kind p <&3; do "
         "case \"$kind\" in done) ended=1; break;; "
         "r) groups=$(for g in $groups; do [ \"$g\" != \"$p\" ] && echo \"$g\"; done);; "
         "g) pids=\"$pids $p\"; groups=\"$groups $p\";; *) pids=\"$pids $p\";; esac; done; "
         "if [ -z \"$ended\" ]; then for g in $groups; do kill -9 -\"$g\" 2>/dev/null; done; fi; "
         "for i in $(seq 100); do alive=''; "
         "for p in $pids; do up \"$p\" && alive=1; done; "
         "[ -z \"$alive\" ] && break; sleep 0.1; done; "
         "for p in $pids; do up \"$p\" || " +
         remove + "; done) </dev/null >/dev/null 2>&1 & exit 0";
}

}  // namespace

OrphanSweeper::OrphanSweeper() {
  const std::string script = sweeper_script();  // before the fork: the child only execs
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
                          const_cast<char*>(script.c_str()), nullptr};
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
