// DeviceWatchdog: the host thread that keeps device ops with no host in the loop
// (device_collectives.h) from hanging. Off the ops' path, every few milliseconds, it looks at
// the ops in flight: one past its deadline, or any op while a peer has failed or exited (its
// DeviceControl says so), fails the communicator (`fail`, which names the cause), marks this
// rank failed for its own peers to see, and fails every op in flight with that error. The
// device may still be waiting on a flag the peer will never set: the watchdog then releases the
// flags of this rank's window (DeviceSpace::release_flags) every tick until the queued work has
// drained, as NCCL's abort flag releases its kernels. An op is watched from the start of its
// issue, not from when its work is all queued: a thread held inside the driver while it queues
// is reported all the same.
#pragma once

#include <chrono>
#include <condition_variable>
#include <exception>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "collectives/buffer_space.h"
#include "collectives/device_control.h"
#include "collectives/device_issue.h"
#include "collectives/work.h"
#include "core/deadline.h"

namespace ringlet::collectives {

class DeviceWatchdog {
 public:
  // fail(message, timed_out): records the communicator's failure (the first wins) and returns
  // it; timed_out when an op's deadline passed. current(): the communicator's failure, or null
  // (one seen elsewhere counts too).
  DeviceWatchdog(std::function<std::exception_ptr(const std::string&, bool)> fail,
                 std::function<std::exception_ptr()> current);
  ~DeviceWatchdog();
  DeviceWatchdog(const DeviceWatchdog&) = delete;
  DeviceWatchdog& operator=(const DeviceWatchdog&) = delete;

  // What became of a watched op: done (within a tick of it), or failed with `failure` (the
  // communicator's), with the peer that had not issued it when its deadline passed (or -1).
  using Settled = std::function<void(const std::string* failure, bool timed_out, int late_peer)>;

  // One watched op, shared by the thread that issues it and the watchdog: what became of its
  // issue. queued(): its work is all queued, done when `completion` is. withdraw(): nothing more
  // to watch (the issue failed and its caller failed the op, or it was captured into a graph).
  class Ticket {
   public:
    void queued(std::shared_ptr<DeviceCompletion> completion);
    void withdraw();

   private:
    friend class DeviceWatchdog;
    std::mutex mutex_;
    std::shared_ptr<DeviceCompletion> completion_;  // null while the issue is under way
    bool withdrawn_ = false;
  };

  // Watches one op from the start of its issue until its ticket's completion is done (or it is
  // withdrawn); `what` names it ("rank 0: all_reduce seq 3").
  std::shared_ptr<Ticket> watch(WorkPtr work, DeviceSpace* space, core::Deadline deadline,
                                std::string what, Settled settled = {});

 private:
  struct InFlight {
    WorkPtr work;
    std::shared_ptr<Ticket> ticket;
    DeviceSpace* space;
    core::Deadline deadline;
    std::string what;
    Settled settled;
    bool timed_out = false;
    int late_peer = -1;
  };
  void loop();
  static bool settled_or_withdrawn(InFlight& op);
  std::exception_ptr check(std::vector<InFlight>& ops);
  void fail_in_flight(std::vector<InFlight>& ops, const std::exception_ptr& failed);
  static std::string settle(InFlight& op, std::string message);

  std::function<std::exception_ptr(const std::string&, bool)> fail_;
  std::function<std::exception_ptr()> current_;
  std::mutex mutex_;
  std::condition_variable wake_;
  std::vector<InFlight> ops_;
  bool stopping_ = false;
  bool said_failed_ = false, said_released_ = false;  // the watchdog thread's own
  std::thread thread_;                                // started by the first watch()
};

}  // namespace ringlet::collectives
