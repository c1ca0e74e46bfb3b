// Request completion and deadline-bounded waits.
#include "transport/request.h"

#include "core/error.h"

namespace ringlet::transport {

std::string RequestLabel::text() const {
  const bool send = kind == Kind::send;
  return core::str("rank ", local_rank, send ? " send of " : " recv of up to ", bytes,
                   send ? " bytes to rank " : " bytes from rank ", peer_rank, " (", transport, ")");
}

void Request::wait(core::Deadline deadline) {
  if (driver_ && !done()) driver_(&deadline);
  if (done()) {
    if (error_) std::rethrow_exception(error_);
    return;
  }
  std::unique_lock lock(mutex_);
  const auto finished = [this] { return done_.load(std::memory_order_relaxed); };
  if (!core::wait_until(cv_, lock, deadline, finished)) {
    RINGLET_THROW(TimeoutError, label_.text(), ": timed out after moving ", bytes_,
                  " bytes (the peer is silent or too slow)");
  }
  if (error_) std::rethrow_exception(error_);
}

bool Request::done() const { return done_.load(std::memory_order_acquire); }

bool Request::failed() const {
  std::lock_guard lock(mutex_);
  return error_ != nullptr;
}

std::size_t Request::bytes() const {
  std::lock_guard lock(mutex_);
  return bytes_;
}

void Request::add_bytes(std::size_t n) {
  std::lock_guard lock(mutex_);
  bytes_ += n;
}

void Request::then(std::function<void()> fn) {
  if (driver_ && !done()) driver_(nullptr);
  {
    std::lock_guard lock(mutex_);
    if (!done_) {
      continuations_.push_back(std::move(fn));
      return;
    }
  }
  fn();
}

void Request::complete() {
  std::vector<std::function<void()>> run;
  {
    std::lock_guard lock(mutex_);
    if (done_) return;
    done_.store(true, std::memory_order_release);
    run.swap(continuations_);
  }
  cv_.notify_all();
  for (auto& fn : run) fn();
}

void Request::fail(std::exception_ptr error) {
  std::vector<std::function<void()>> run;
  {
    std::lock_guard lock(mutex_);
    if (done_) return;
    error_ = std::move(error);
    done_.store(true, std::memory_order_release);
    run.swap(continuations_);
  }
  cv_.notify_all();
  for (auto& fn : run) fn();
}

void wait_all(const std::vector<RequestPtr>& requests, core::Deadline deadline) {
  for (const auto& r : requests) r->wait(deadline);
}

}  // namespace ringlet::transport
