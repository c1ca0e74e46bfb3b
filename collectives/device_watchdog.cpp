// DeviceWatchdog: the tick, the checks and the release after a failure.
#include "collectives/device_watchdog.h"

#include <algorithm>
#include <optional>

#include "collectives/device_space.h"
#include "collectives/work_driver.h"
#include "core/error.h"
#include "core/log.h"
#include "core/thread_name.h"

namespace ringlet::collectives {
namespace {

constexpr auto kTick = std::chrono::milliseconds(5);
// Once the communicator closes, released work gets this long to drain before the thread ends.
constexpr auto kDrainOnClose = std::chrono::seconds(10);

}  // namespace

DeviceWatchdog::DeviceWatchdog(std::function<std::exception_ptr(const std::string&, bool)> fail,
                               std::function<std::exception_ptr()> current)
    : fail_(std::move(fail)), current_(std::move(current)) {}

DeviceWatchdog::~DeviceWatchdog() {
  {
    std::lock_guard lock(mutex_);
    stopping_ = true;
  }
  wake_.notify_all();
  if (thread_.joinable()) thread_.join();
}

void DeviceWatchdog::Ticket::queued(std::shared_ptr<DeviceCompletion> completion) {
  std::lock_guard lock(mutex_);
  completion_ = std::move(completion);
}

void DeviceWatchdog::Ticket::withdraw() {
  std::lock_guard lock(mutex_);
  withdrawn_ = true;
}

std::shared_ptr<DeviceWatchdog::Ticket> DeviceWatchdog::watch(WorkPtr work, DeviceSpace* space,
                                                              core::Deadline deadline,
                                                              std::string what, Settled settled) {
  auto ticket = std::make_shared<Ticket>();
  std::lock_guard lock(mutex_);
  ops_.push_back({std::move(work), ticket, space, deadline, std::move(what), std::move(settled)});
  if (!thread_.joinable()) {
    thread_ = std::thread([this] {
      core::name_this_thread("rl-dev-watchdog");
      loop();
    });
  }
  return ticket;
}

// Whether the op needs no more watching: withdrawn, or its queued work done (its owner told).
bool DeviceWatchdog::settled_or_withdrawn(InFlight& op) {
  std::shared_ptr<DeviceCompletion> completion;
  {
    std::lock_guard lock(op.ticket->mutex_);
    if (op.ticket->withdrawn_) return true;
    completion = op.ticket->completion_;
  }
  if (completion == nullptr || !completion->done()) return false;  // still issuing, or queued
  if (op.settled) op.settled(nullptr, false, -1);
  return true;
}

// Tells the op's owner how it failed (before the communicator fails: that dumps its records);
// returns the message.
std::string DeviceWatchdog::settle(InFlight& op, std::string message) {
  if (op.settled) op.settled(&message, op.timed_out, op.late_peer);
  op.settled = nullptr;
  return message;
}

// The communicator's failure, if there is one now: already recorded, or found here (a deadline
// passed, a peer failed or exited while an op was in flight).
std::exception_ptr DeviceWatchdog::check(std::vector<InFlight>& ops) {
  if (auto failed = current_()) return failed;
  for (InFlight& op : ops) {
    if (op.deadline.expired()) {
      op.timed_out = true;
      std::vector<int> late;
      if (DeviceControl* control = op.space->device_control()) {
        late = control->not_issued(op.work->seq());
      }
      if (!late.empty()) op.late_peer = late.front();
      std::string who =
          "every peer issued it, but the device work of one did not reach it (a "
          "rank stopped or stuck)";
      if (!late.empty()) {
        who = "rank " + std::to_string(late.front());
        for (std::size_t i = 1; i < late.size(); ++i) who += ", " + std::to_string(late[i]);
        who += late.size() == 1 ? " has not issued it" : " have not issued it";
      }
      return fail_(settle(op, core::str(op.what, " did not finish on the device before its ",
                                        "deadline (RINGLET_TIMEOUT, in milliseconds): ", who)),
                   true);
    }
    if (DeviceControl* control = op.space->device_control()) {
      const std::string trouble = control->peer_trouble();
      if (!trouble.empty()) {
        return fail_(
            settle(op, core::str(op.what, " failed while waiting on the device: ", trouble)),
            false);
      }
    }
  }
  return nullptr;
}

// Fails every op still watched with the communicator's failure and releases the flags their
// device work may wait on (again each tick, until it has drained). Said once in the log as found
// (a failure found here reaches the caller only at its next wait), and once released.
void DeviceWatchdog::fail_in_flight(std::vector<InFlight>& ops, const std::exception_ptr& failed) {
  const std::string reason = core::error_text(failed);
  if (!said_failed_) {
    core::log(core::LogLevel::warn, reason, " (device watchdog: ", ops.size(),
              " op(s) in flight failed; releasing this rank's flag waits on the device)");
    said_failed_ = true;
  }
  for (InFlight& op : ops) {
    if (op.settled) op.settled(&reason, op.timed_out, op.late_peer);
    op.settled = nullptr;  // once
    WorkDriver::fail(*op.work, failed);
    if (DeviceControl* control = op.space->device_control()) control->set_failed(reason);
    op.space->release_flags(reason);
  }
  if (!said_released_) {
    core::log(core::LogLevel::debug, "device watchdog: this rank's flag waits released");
    said_released_ = true;
  }
}

void DeviceWatchdog::loop() {
  std::unique_lock lock(mutex_);
  std::optional<core::Deadline> give_up;  // set once closing
  while (true) {
    if (stopping_) {
      if (!give_up) give_up = core::Deadline::after(kDrainOnClose);
      if (ops_.empty() || give_up->expired()) break;
    }
    wake_.wait_for(lock, kTick);
    std::vector<InFlight> ops = std::move(ops_);
    ops_.clear();
    lock.unlock();
    std::erase_if(ops, settled_or_withdrawn);
    std::exception_ptr failed = ops.empty() ? nullptr : check(ops);
    if (failed) fail_in_flight(ops, failed);
    lock.lock();
    // Ops still queued on the device stay watched (released again next tick when failed).
    ops_.insert(ops_.begin(), std::make_move_iterator(ops.begin()),
                std::make_move_iterator(ops.end()));
    if (stopping_ && !failed) break;  // a clean close: nothing in flight is failing
  }
}

}  // namespace ringlet::collectives
