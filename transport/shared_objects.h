// The named shared-memory objects a job can leave in /dev/shm when its processes die before they
// unlink them: shm segments no peer attached yet and the emulated RDMA device's objects. Both
// carry their creator's pid in their names ("ringlet-shm-<pid>-...", "ringlet-ibemu-<pid>-...").
// A launcher, once its workers have exited whatever way, removes what those pids made; other
// jobs' objects on the host are not touched. (A job's own first segment or device also sweeps
// objects of dead processes: ShmSegment::remove_stale, rdma::remove_stale_objects.)
#pragma once

#include <sys/types.h>

#include <vector>

namespace ringlet::transport {

// Unlinks the objects created by `exited` (processes that have exited and been reaped); returns
// how many. A pid that is alive again (reused) is skipped.
int remove_objects_of(const std::vector<pid_t>& exited);

}  // namespace ringlet::transport
