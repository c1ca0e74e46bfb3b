// YieldWindow: how long a waiter yields its core before it sleeps, counted in the time it spent
// looking for its message itself. A yield that returns late gave the core to other threads
// meanwhile (ranks taking turns on a core), which is no reason to stop looking: a rank that
// sleeps then pays a wake-up from its peer's core (a futex's or poll's, an interrupt to another
// CPU) where one look more, after its neighbours' turns, would have found the message. Past five
// times its looking time in wall time it closes all the same, so a rank that waits long while
// others keep its core busy goes to sleep rather than keep taking turns.
#pragma once

#include <sched.h>

#include <chrono>

namespace ringlet::transport {

class YieldWindow {
 public:
  using Clock = std::chrono::steady_clock;

  // A yield that took this long ran another thread meanwhile (one that found the core idle, or
  // only other waiters taking their turns, returns within a few microseconds).
  static constexpr auto kOthersRan = std::chrono::microseconds(5);
  // The wall time the window may last, in units of its looking time.
  static constexpr int kWallFactor = 5;

  explicit YieldWindow(Clock::duration looking, Clock::time_point start = Clock::now())
      : looking_(looking), start_(start), last_(start) {}

  // True while the waiter has looked for less than its looking time and the wall limit has not
  // passed (as of the last yield).
  bool open() const {
    const auto wall = last_ - start_;
    return wall - given_ < looking_ && wall < kWallFactor * looking_;
  }

  // Yields the core once.
  void yield() {
    const auto before = Clock::now();
    sched_yield();
    count(before, Clock::now());
  }

  // What yield() records of a yield from `before` to `after`: a long one is other threads' time.
  void count(Clock::time_point before, Clock::time_point after) {
    if (after - before >= kOthersRan) given_ += after - before;
    last_ = after;
  }

 private:
  Clock::duration looking_;
  Clock::time_point start_, last_;
  Clock::duration given_{0};
};

}  // namespace ringlet::transport
