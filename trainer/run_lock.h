// The lock of a run directory, so that two jobs never write one run. D/lock is held with
// flock(2) by the job's rank 0 for as long as it runs and names its holder ("pid 4242 on host
// n1 since 2026-11-24 10:31:07"). A second job fails at once naming that holder. The kernel
// drops the lock when its holder dies, however it dies: a lock file that still names a holder
// but is not held is a stale lock, which the next job takes over (and says so).
#pragma once

#include <filesystem>
#include <string>

#include "core/error.h"

namespace ringlet::trainer {

// Another job holds the run directory (the message names it and the holder).
class RunLockedError : public core::Error {
 public:
  using core::Error::Error;
};

class RunLock {
 public:
  // Takes dir/lock or throws RunLockedError; the directory must exist.
  explicit RunLock(const std::filesystem::path& dir);
  ~RunLock();  // empties the file (a finished job leaves no stale holder) and unlocks
  RunLock(const RunLock&) = delete;
  RunLock& operator=(const RunLock&) = delete;

  // The holder the lock file named when it was taken over from a dead job; "" when the file
  // was empty (the last job ended normally, or there was none).
  const std::string& stale_holder() const { return stale_; }

 private:
  std::filesystem::path path_;
  int fd_ = -1;
  std::string stale_;
};

// "pid 4242 on host n1 since 2026-11-24 10:31:07": this process, as a lock file names it.
std::string this_process_as_holder();
// The local time now, in std::put_time's `format` ("%Y-%m-%d %H:%M:%S").
std::string local_time_now(const char* format);

}  // namespace ringlet::trainer
