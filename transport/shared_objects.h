// The named shared-memory objects ringlet makes in /dev/shm, in one place: their names and
// sweeping the ones a dead process left. Every name carries its creator's pid,
// "<kind><pid>-<rest>": shm segments ("ringlet-shm-", transport/shm/segment.h) and the emulated
// RDMA device's objects ("ringlet-ibemu-", transport/rdma/emulated.h). A job that dies before it
// unlinks them leaves them behind; they are removed
//   - by the next segment or emulated device this host creates (a dead creator's objects),
//   - by a launcher once its workers have exited, whatever way (the objects of those pids),
//   - by the orphan sweeper when the launcher itself was killed (distributed/launch/).
// Other jobs' objects are never touched: a live pid's, or one that is alive again (reused), stay.
#pragma once

#include <sys/types.h>

#include <filesystem>
#include <functional>
#include <string>
#include <vector>

namespace ringlet::transport {

inline constexpr const char* kShmSegmentKind = "ringlet-shm-";
inline constexpr const char* kRdmaEmuKind = "ringlet-ibemu-";
// Every kind above, for the sweeps that remove a process's objects whatever they are.
inline constexpr const char* kSharedObjectKinds[] = {kShmSegmentKind, kRdmaEmuKind};

// "/<kind><pid>-<rest>": the name to shm_open.
std::string shared_object_name(const char* kind, pid_t pid, const std::string& rest);

// The creator's pid in `file` (a name in /dev/shm) of `kind`; 0 when it is not one.
pid_t creator_pid(const std::string& file, const char* kind);

// True when `pid` names no process (it exited and was reaped); false for a live or unknown one.
bool process_gone(pid_t pid);

// Unlinks each object of `kind` in `dir` whose creator `remove(pid, path)` accepts; returns how
// many it removed.
int sweep_shared_objects(const char* kind,
                         const std::function<bool(pid_t, const std::filesystem::path&)>& remove,
                         const std::filesystem::path& dir = "/dev/shm");

// Unlinks the objects of every kind created by `exited` (processes that have exited and been
// reaped); returns how many. A pid that is alive again (reused) is skipped.
int remove_objects_of(const std::vector<pid_t>& exited);

}  // namespace ringlet::transport
