// Work completion: a collective split over channels is done when every part reported; a device
// op when its device completion is.
#include "collectives/work.h"

#include <chrono>
#include <thread>

#include "collectives/device_issue.h"
#include "core/error.h"

namespace ringlet::collectives {

std::string Work::describe() const {
  return core::str("rank ", rank_, ": ", op_name_, " seq ", seq_);
}

bool Work::device_done() const {
  if (!done_ && device_ != nullptr && device_->done()) done_ = true;
  return done_;
}

void Work::wait(core::Deadline deadline) {
  std::unique_lock lock(mutex_);
  if (device_ != nullptr) {
    // The device gives no wake-up: poll its event, briefly at first (a host wait the caller
    // asked for; the stream-side wait, collectives::wait_on_stream, makes none).
    auto pause = std::chrono::microseconds(1);
    while (!device_done()) {
      lock.unlock();
      if (deadline.expired()) {
        RINGLET_THROW(TimeoutError, describe(),
                      ": wait() timed out (the collective is still running on the device)");
      }
      std::this_thread::sleep_for(pause);
      pause = std::min(pause * 2, std::chrono::microseconds(100));
      lock.lock();
    }
  } else if (!core::wait_until(cv_, lock, deadline, [this] { return done_; })) {
    RINGLET_THROW(TimeoutError, describe(), ": wait() timed out (the collective is still running)");
  }
  if (error_) std::rethrow_exception(error_);
}

void Work::wait() { wait(core::Deadline::after(timeout_)); }

bool Work::done() const {
  std::lock_guard lock(mutex_);
  return device_done();
}

std::exception_ptr Work::error() const {
  std::lock_guard lock(mutex_);
  return error_;
}

void Work::part_done() {
  std::unique_lock lock(mutex_);
  if (done_ || --parts_left_ > 0) return;
  done_ = true;
  finished(lock);
}

void Work::fail(std::exception_ptr error) {
  std::unique_lock lock(mutex_);
  if (done_) return;
  done_ = true;
  error_ = std::move(error);
  finished(lock);
}

// The callbacks run outside the lock: one may wait on this Work or issue the next op.
void Work::finished(std::unique_lock<std::mutex>& lock) {
  std::vector<std::function<void()>> callbacks = std::move(callbacks_);
  callbacks_.clear();
  lock.unlock();
  cv_.notify_all();
  for (auto& callback : callbacks) callback();
}

void Work::on_done(std::function<void()> callback) {
  {
    std::lock_guard lock(mutex_);
    RINGLET_CHECK(device_ == nullptr, ValueError, describe(),
                  ": on_done is for host ops; a device op is found done by done() or wait()");
    if (!done_) {
      callbacks_.push_back(std::move(callback));
      return;
    }
  }
  callback();
}

void Work::complete_on_device(std::shared_ptr<DeviceCompletion> completion) {
  std::lock_guard lock(mutex_);
  device_ = std::move(completion);
}

std::shared_ptr<DeviceCompletion> Work::device_completion() const {
  std::lock_guard lock(mutex_);
  return device_;
}

}  // namespace ringlet::collectives
