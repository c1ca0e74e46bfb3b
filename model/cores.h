// Cores: the cores a host's ranks share (or a rank's own), as calendars. Each core keeps the
// intervals it is booked for from the present on, so work booked for later (a message queued
// behind others on its link holds its CPUs when it moves) leaves the core free for work that
// comes before it. Work on one core fills its free time from when it may start, piece by piece
// around what is booked, as a scheduler runs a thread in the time other work leaves; work that
// needs two cores at once takes the earliest gap long enough on both. The network keeps each rank
// on one core.
//
// Where every job took one gap long enough for all of it, a core stood idle before any booking its
// work did not fit ahead of, and a message a float shorter could move a job past a booking: a
// 4-rank ring of 1 MiB took 1483 us in the simulation and 1567 us of 4 bytes less
// (bench/RESULTS.md, 2026-12-05 "Work in the gaps").
#pragma once

#include <cstddef>
#include <utility>
#include <vector>

namespace ringlet::model {

class Cores {
 public:
  explicit Cores(int count);

  // The earliest time >= from at which `core` is free for `seconds`.
  double earliest(int core, double from, double seconds) const;
  // Books `core` from `at` for `seconds` (at an answer of earliest()).
  void book(int core, double at, double seconds);
  // Books `seconds` of work that can be interrupted on `core` from `from` on: each gap in turn,
  // as much of the work as it holds, until all is booked; returns when the last piece ends.
  double fill(int core, double from, double seconds);
  // Intervals that ended by `now` are dropped: nothing is booked before the present.
  void forget_before(double now);
  int count() const { return static_cast<int>(busy_.size()); }

  // Work that starts before a booking and ends within this of its start meets it: the two times are
  // sums of the same costs in another order, whose rounding must not push the work past the booking
  // (a ring's ranks, doing the same steps at the same times, meet their own bookings exactly; a gap
  // short by 1e-16 s once made a 2-rank 256 KiB all-reduce 14 us slower). Nothing is priced in
  // picoseconds.
  static constexpr double kMeetSeconds = 1e-12;

 private:
  using Interval = std::pair<double, double>;  // [start, end)
  std::size_t index(int core) const;
  std::vector<Interval>::const_iterator first_ending_after(std::size_t core, double from) const;
  bool free_on(std::size_t core, double from, double to) const;

  std::vector<std::vector<Interval>> busy_;  // per core, sorted by start
  double first_end_ = 0;                     // no booking ends before this
};

// The earliest time >= from at which core `ca` of `a` and core `cb` of `b` (another pool, or
// another core of the same) are both free for `seconds`.
double earliest_together(const Cores& a, int ca, const Cores& b, int cb, double from,
                         double seconds);

}  // namespace ringlet::model
