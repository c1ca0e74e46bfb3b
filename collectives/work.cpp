// Work completion: a collective split over channels is done when every part reported.
#include "collectives/work.h"

#include "core/error.h"

namespace ringlet::collectives {

std::string Work::describe() const {
  return core::str("rank ", rank_, ": ", op_name_, " seq ", seq_);
}

void Work::wait(core::Deadline deadline) {
  std::unique_lock lock(mutex_);
  if (!core::wait_until(cv_, lock, deadline, [this] { return done_; })) {
    RINGLET_THROW(TimeoutError, describe(), ": wait() timed out (the collective is still running)");
  }
  if (error_) std::rethrow_exception(error_);
}

bool Work::done() const {
  std::lock_guard lock(mutex_);
  return done_;
}

std::exception_ptr Work::error() const {
  std::lock_guard lock(mutex_);
  return error_;
}

void Work::part_done() {
  {
    std::lock_guard lock(mutex_);
    if (done_ || --parts_left_ > 0) return;
    done_ = true;
  }
  cv_.notify_all();
}

void Work::fail(std::exception_ptr error) {
  {
    std::lock_guard lock(mutex_);
    if (done_) return;
    done_ = true;
    error_ = std::move(error);
  }
  cv_.notify_all();
}

}  // namespace ringlet::collectives
