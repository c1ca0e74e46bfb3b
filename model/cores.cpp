// The cores' calendars (see cores.h).
#include "model/cores.h"

#include <algorithm>
#include <limits>

#include "core/error.h"

namespace ringlet::model {

Cores::Cores(int count) : busy_(static_cast<std::size_t>(std::max(1, count))) {}

// A core's bookings never overlap, so sorted by start they are sorted by end too: those that
// end by `from` are a prefix.
std::vector<Cores::Interval>::const_iterator Cores::first_ending_after(std::size_t core,
                                                                       double from) const {
  const auto& booked = busy_[core];
  return std::partition_point(booked.begin(), booked.end(),
                              [from](const Interval& b) { return b.second <= from; });
}

bool Cores::free_on(std::size_t core, double from, double to) const {
  const auto next = first_ending_after(core, from);
  return next == busy_[core].end() || next->first >= to;
}

// The earliest time >= from at which the core is free for `seconds`: `from`, or the end of a
// booking that leaves a gap long enough after it.
double Cores::earliest_on(std::size_t core, double from, double seconds) const {
  double t = from;
  for (auto b = first_ending_after(core, from); b != busy_[core].end(); ++b) {
    if (b->first >= t + seconds) break;  // the gap before it is long enough
    t = b->second;
  }
  return t;
}

// Each core's earliest from t; the `needed`-th soonest of them is no later than the answer
// (the cores free then include `needed` that were free from t), so try again from there until
// `needed` cores are free at once.
double Cores::earliest(double from, double seconds, int needed) const {
  RINGLET_CHECK(needed >= 1 && needed <= count(), Error, "simulated cores: ", needed, " of ",
                busy_.size(), " cores asked for");
  if (needed == 1) {  // the soonest core's earliest: it is free then
    double soonest = std::numeric_limits<double>::infinity();
    for (std::size_t c = 0; c < busy_.size(); ++c) {
      soonest = std::min(soonest, earliest_on(c, from, seconds));
    }
    return soonest;
  }
  const auto k = static_cast<std::size_t>(needed - 1);
  std::vector<double> starts(busy_.size());
  for (double t = from;;) {
    for (std::size_t c = 0; c < busy_.size(); ++c) starts[c] = earliest_on(c, t, seconds);
    std::nth_element(starts.begin(), starts.begin() + static_cast<std::ptrdiff_t>(k), starts.end());
    if (starts[k] == t) return t;
    t = starts[k];
  }
}

void Cores::book(double at, double seconds, int needed) {
  for (std::size_t c = 0; c < busy_.size() && needed > 0; ++c) {
    if (!free_on(c, at, at + seconds)) continue;
    auto& core = busy_[c];
    const Interval booked{at, at + seconds};
    core.insert(std::upper_bound(core.begin(), core.end(), booked), booked);
    first_end_ = std::min(first_end_, booked.second);
    --needed;
  }
  RINGLET_CHECK(needed == 0, Error, "simulated cores: booked a time they are not free at");
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

double earliest_together(const Cores& a, const Cores& b, double from, double seconds) {
  double t = from;
  for (;;) {
    const double in_a = a.earliest(t, seconds);
    const double in_b = b.earliest(in_a, seconds);
    if (in_b == in_a) return in_a;
    t = in_b;
  }
}

}  // namespace ringlet::model
