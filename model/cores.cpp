// The cores' calendars (see cores.h).
#include "model/cores.h"

#include <algorithm>
#include <limits>

#include "core/error.h"

namespace ringlet::model {

Cores::Cores(int count) : busy_(static_cast<std::size_t>(std::max(1, count))) {}

// A core's bookings never overlap (by more than kMeetSeconds, less than any work), so sorted by
// start they are sorted by end too: those that end by `from` are a prefix.
std::vector<Cores::Interval>::const_iterator Cores::first_ending_after(std::size_t core,
                                                                       double from) const {
  const auto& booked = busy_[core];
  return std::partition_point(booked.begin(), booked.end(),
                              [from](const Interval& b) { return b.second <= from; });
}

bool Cores::free_on(std::size_t core, double from, double to) const {
  const auto next = first_ending_after(core, from);
  return next == busy_[core].end() || (next->first >= from && next->first + kMeetSeconds >= to);
}

// The calendar of `core`, which must be one of these.
std::size_t Cores::index(int core) const {
  RINGLET_CHECK(core >= 0 && core < count(), Error, "simulated cores: core ", core, " of ",
                count());
  return static_cast<std::size_t>(core);
}

// `from`, or the end of a booking that leaves a gap long enough after it.
double Cores::earliest(int core, double from, double seconds) const {
  const std::size_t c = index(core);
  double t = from;
  for (auto b = first_ending_after(c, from); b != busy_[c].end(); ++b) {
    // The gap before it is long enough (work from within a booking never is).
    if (b->first >= t && b->first + kMeetSeconds >= t + seconds) break;
    t = b->second;
  }
  return t;
}

void Cores::book(int core, double at, double seconds) {
  const std::size_t c = index(core);
  if (seconds <= 0) return;  // no work, no interval: none of length 0 inside another
  if (!free_on(c, at, at + seconds)) {
    const Interval& in_way = *first_ending_after(c, at);
    RINGLET_THROW(Error, "simulated cores: booked core ", core, " from ", at, " s for ", seconds,
                  " s, where it is booked from ", in_way.first, " to ", in_way.second, " s");
  }
  const Interval booked{at, at + seconds};
  busy_[c].insert(std::upper_bound(busy_[c].begin(), busy_[c].end(), booked), booked);
  first_end_ = std::min(first_end_, booked.second);
}

// From `from`: past each booking it is in or meets, then into the gap before the next one.
double Cores::fill(int core, double from, double seconds) {
  const std::size_t c = index(core);
  double t = from;
  while (seconds > kMeetSeconds) {
    const auto next = first_ending_after(c, t);
    if (next != busy_[c].end() && next->first < t + kMeetSeconds) {
      t = std::max(t, next->second);
      continue;
    }
    const double piece = next == busy_[c].end() ? seconds : std::min(seconds, next->first - t);
    book(core, t, piece);
    t += piece;
    seconds -= piece;
  }
  return t;
}

void Cores::forget_before(double now) {
  if (now < first_end_) return;  // nothing has ended yet
  first_end_ = std::numeric_limits<double>::infinity();
  for (std::size_t c = 0; c < busy_.size(); ++c) {
    auto& core = busy_[c];
    core.erase(core.begin(), first_ending_after(c, now));
    if (!core.empty()) first_end_ = std::min(first_end_, core.front().second);
  }
}

double earliest_together(const Cores& a, int ca, const Cores& b, int cb, double from,
                         double seconds) {
  double t = from;
  for (;;) {
    const double in_a = a.earliest(ca, t, seconds);
    const double in_b = b.earliest(cb, in_a, seconds);
    if (in_b == in_a) return in_a;
    t = in_b;
  }
}

}  // namespace ringlet::model
