// A point in time after which a blocking wait gives up. Every blocking wait in ringlet takes
// one, so nothing waits forever.
#pragma once

#include <chrono>
#include <condition_variable>
#include <mutex>

namespace ringlet::core {

class Deadline {
 public:
  using Clock = std::chrono::steady_clock;

  static Deadline after(Clock::duration timeout) { return Deadline(Clock::now() + timeout); }
  static Deadline never() { return Deadline(Clock::time_point::max()); }

  bool expired() const { return Clock::now() >= at_; }
  Clock::duration remaining() const {
    const auto now = Clock::now();
    return now >= at_ ? Clock::duration::zero() : at_ - now;
  }
  Clock::time_point at() const { return at_; }

 private:
  explicit Deadline(Clock::time_point at) : at_(at) {}
  Clock::time_point at_;
};

// cv.wait_until with a Deadline; Deadline::never() waits without a timeout (libstdc++'s
// wait_until overflows on time_point::max()). Returns pred() at the end.
template <class Pred>
bool wait_until(std::condition_variable& cv, std::unique_lock<std::mutex>& lock,
                const Deadline& deadline, Pred pred) {
  if (deadline.at() == Deadline::Clock::time_point::max()) {
    cv.wait(lock, pred);
    return true;
  }
  return cv.wait_until(lock, deadline.at(), pred);
}

}  // namespace ringlet::core
