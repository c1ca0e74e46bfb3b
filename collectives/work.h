// Work: the handle of one asynchronous collective. The communicator's progress thread(s)
// complete or fail it; callers wait with a deadline. A failed Work rethrows its error (a
// CollectiveError naming local rank, failed peer, op, seq and bytes done) from every wait().
// wait() with no deadline waits as long as the communicator's timeout (c10d's Work::wait()
// uses its group's).
// A device op issued with no host in the loop (device_issue.h) holds its DeviceCompletion
// instead: it is done once the device has run it (an event query), and a wait() polls that;
// the communicator's watchdog fails it when its deadline passes or a peer fails first.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <exception>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "core/deadline.h"

namespace ringlet::collectives {

class DeviceCompletion;

class Work {
 public:
  // Named in messages as "rank 0: all_reduce seq 3" (spelled out only then; `op_name` is a
  // string literal). `timeout`: how long wait() with no deadline waits.
  Work(int rank, const char* op_name, std::uint64_t seq, int parts = 1,
       std::chrono::milliseconds timeout = std::chrono::minutes(10))
      : rank_(rank), op_name_(op_name), seq_(seq), parts_left_(parts), timeout_(timeout) {}

  // Blocks until done or failed (rethrows), or the deadline passes (TimeoutError).
  void wait(core::Deadline deadline);
  // The same, the deadline the communicator's timeout from now.
  void wait();
  std::chrono::milliseconds timeout() const { return timeout_; }
  bool done() const;
  std::exception_ptr error() const;
  std::string describe() const;
  std::uint64_t seq() const { return seq_; }
  // Runs `callback` once the op is done or failed, on the thread that finishes it (a progress
  // thread, or the issuing thread for an op run inline), or at once here if it already is.
  // Host ops only: a device op is found done by queries (done(), wait()), and refuses it.
  void on_done(std::function<void()> callback);

 private:
  // The communicator completes and fails its Works through WorkDriver (work_driver.h).
  friend struct WorkDriver;
  void part_done();
  void fail(std::exception_ptr error);
  void complete_on_device(std::shared_ptr<DeviceCompletion> completion);
  std::shared_ptr<DeviceCompletion> device_completion() const;

  mutable std::mutex mutex_;
  std::condition_variable cv_;
  int rank_;
  const char* op_name_;
  std::uint64_t seq_;
  int parts_left_;
  std::chrono::milliseconds timeout_;
  mutable bool done_ = false;  // a device op's turns true when a query finds it done
  std::exception_ptr error_;
  std::shared_ptr<DeviceCompletion> device_;
  std::vector<std::function<void()>> callbacks_;
  void finished(std::unique_lock<std::mutex>& lock);  // wakes the waiters, runs the callbacks
  bool device_done() const;  // under mutex_: done_, after asking the device
};

using WorkPtr = std::shared_ptr<Work>;

}  // namespace ringlet::collectives
