// RingletWork: see ringlet_work.h.
#include "ringlet_work.h"

#include "core/error.h"

namespace ringlet::torch_backend {

RingletWork::RingletWork(int rank, c10d::OpType type, const char* name,
                         std::vector<at::Tensor> outputs, std::chrono::milliseconds timeout)
    : c10d::Work(rank, type),
      name_(name),
      outputs_(std::move(outputs)),
      timeout_(timeout),
      future_(
          c10::make_intrusive<c10::ivalue::Future>(c10::ListType::create(c10::TensorType::get()))) {
}

c10::intrusive_ptr<c10d::Work> RingletWork::start(c10::intrusive_ptr<RingletWork> work,
                                                  std::vector<collectives::WorkPtr> parts,
                                                  std::function<void()> after) {
  work->after_ = std::move(after);
  work->parts_ = parts;
  work->left_ = static_cast<int>(parts.size());
  if (parts.empty()) work->complete(nullptr);
  for (const auto& part : parts) {
    part->on_done([work, part] { work->part_finished(part); });
  }
  return work;
}

void RingletWork::part_finished(const collectives::WorkPtr& part) {
  if (auto error = part->error()) {
    std::lock_guard lock(mutex_);
    if (!first_error_) first_error_ = error;
  }
  if (--left_ > 0) return;
  std::exception_ptr error;
  {
    std::lock_guard lock(mutex_);
    error = first_error_;
  }
  if (!error && after_) {
    try {
      after_();
    } catch (...) {
      error = std::current_exception();
    }
  }
  complete(error);
}

void RingletWork::complete(std::exception_ptr error) {
  after_ = nullptr;  // drops what it kept alive (inputs, staging copies)
  finish(error);     // completed_, exception_, wakes wait()
  if (error) {
    future_->setError(error);
  } else {
    future_->markCompleted(c10::IValue(outputs_));
  }
}

bool RingletWork::wait(std::chrono::milliseconds timeout) {
  // Without a timeout of the caller's, the op's own deadline (the group's timeout, from when it
  // started) ends it with the error that names the peer; this wait only backs it up, a little
  // later (the op waits up to 2 s for another rank's root cause too).
  const auto limit = timeout == kNoTimeout ? timeout_ + std::chrono::seconds(5) : timeout;
  std::unique_lock lock(mutex_);
  if (!cv_.wait_for(lock, limit, [this] { return completed_; })) {
    RINGLET_THROW(TimeoutError, "ringlet: rank ", rank_, ": ", name_, " did not complete within ",
                  limit.count(), " ms");
  }
  if (exception_) std::rethrow_exception(exception_);
  return true;
}

}  // namespace ringlet::torch_backend
