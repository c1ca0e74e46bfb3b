// Cores: the cores a host's ranks share (or a rank's own), as calendars. Each core keeps the
// intervals it is booked for from the present on, so work booked for later (a message queued
// behind others on its link holds its CPUs when it moves) leaves the core free for work that
// comes before it. A job takes the earliest gap long enough on any core.
#pragma once

#include <cstddef>
#include <utility>
#include <vector>

namespace ringlet::model {

class Cores {
 public:
  explicit Cores(int count);

  // The earliest time >= from at which `needed` (1 or 2) of the cores are free for `seconds`.
  double earliest(double from, double seconds, int needed = 1) const;
  // Books `needed` cores free from `at` for `seconds` (at an answer of earliest()).
  void book(double at, double seconds, int needed = 1);
  // Intervals that ended by `now` are dropped: nothing is booked before the present.
  void forget_before(double now);
  int count() const { return static_cast<int>(busy_.size()); }

 private:
  using Interval = std::pair<double, double>;  // [start, end)
  std::vector<Interval>::const_iterator first_ending_after(std::size_t core, double from) const;
  bool free_on(std::size_t core, double from, double to) const;
  double earliest_on(std::size_t core, double from, double seconds) const;

  std::vector<std::vector<Interval>> busy_;  // per core, sorted by start
  double first_end_ = 0;                     // no booking ends before this
};

// The earliest time >= from at which a core of `a` and a core of `b` (another pool) are both
// free for `seconds`.
double earliest_together(const Cores& a, const Cores& b, double from, double seconds);

}  // namespace ringlet::model
