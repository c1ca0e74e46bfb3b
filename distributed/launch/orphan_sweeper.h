// What a launcher killed by SIGKILL cannot do itself: remove the shared-memory objects its
// workers leave in /dev/shm (shm segments not attached yet, the emulated RDMA device's objects,
// named with their creator's pid; transport/shared_objects.h). The program re-executes itself
// (/proc/self/exe) as the sweeper: a process in its own session, not a child for long (it forks
// once and its parent exits), that reads the worker pids the launcher sends it over a socket and
// never reaches the program's main. When the socket closes without the launcher's "done" (it
// was killed), it kills what is left of the workers' process groups (a worker's own children;
// the workers themselves die with the launcher: PR_SET_PDEATHSIG). Either way it waits (at most
// 10 s) until the watched are gone and removes the objects named with their pids: after a clean
// end there are none, after a killed rank there are its.
#pragma once

#include <sys/types.h>

namespace ringlet::distributed {

class OrphanSweeper {
 public:
  OrphanSweeper();   // starts it; when it cannot start there is none (watch does nothing)
  ~OrphanSweeper();  // says "done": no group is killed, the sweep still runs
  OrphanSweeper(const OrphanSweeper&) = delete;
  OrphanSweeper& operator=(const OrphanSweeper&) = delete;

  // `leads_group`: the process leads its own process group, which the sweeper kills whole.
  void watch(pid_t worker, bool leads_group);
  // The worker was reaped: its process-group id may be reused, so it is never killed (its
  // objects are still swept).
  void reaped(pid_t worker);

 private:
  int fd_ = -1;
};

}  // namespace ringlet::distributed
