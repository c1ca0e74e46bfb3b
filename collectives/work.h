// Work: the handle of one asynchronous collective. The communicator's progress thread(s)
// complete or fail it; callers wait with a deadline. A failed Work rethrows its error (a
// CollectiveError naming local rank, failed peer, op, seq and bytes done) from every wait().
#pragma once

#include <condition_variable>
#include <exception>
#include <memory>
#include <mutex>
#include <string>

#include "core/deadline.h"

namespace ringlet::collectives {

class Work {
 public:
  explicit Work(std::string describe, int parts = 1)
      : describe_(std::move(describe)), parts_left_(parts) {}

  // Blocks until done or failed (rethrows), or the deadline passes (TimeoutError).
  void wait(core::Deadline deadline);
  bool done() const;
  std::exception_ptr error() const;
  const std::string& describe() const { return describe_; }

  // --- for the communicator: each of `parts` channel parts reports once ---
  void part_done();
  void fail(std::exception_ptr error);

 private:
  mutable std::mutex mutex_;
  std::condition_variable cv_;
  std::string describe_;
  int parts_left_;
  bool done_ = false;
  std::exception_ptr error_;
};

using WorkPtr = std::shared_ptr<Work>;

}  // namespace ringlet::collectives
