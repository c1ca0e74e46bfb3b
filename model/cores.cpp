// The cores' calendars (see cores.h).
#include "model/cores.h"

#include <algorithm>
#include <limits>

#include "core/error.h"

namespace ringlet::model {

Cores::Cores(int count) : busy_(static_cast<std::size_t>(std::max(1, count))) {}

bool Cores::free_on(std::size_t core, double from, double to) const {
  for (const Interval& b : busy_[core]) {
    if (b.first >= to) return true;  // sorted: the rest start later still
    if (b.second > from) return false;
  }
  return true;
}

int Cores::free_count(double from, double to) const {
  int free = 0;
  for (std::size_t c = 0; c < busy_.size(); ++c) free += free_on(c, from, to) ? 1 : 0;
  return free;
}

// A gap can only open at `from` or where a booking ends: try those in order.
double Cores::earliest(double from, double seconds, int needed) const {
  if (free_count(from, from + seconds) >= needed) return from;
  std::vector<double> ends;
  for (const auto& core : busy_) {
    for (const Interval& b : core) {
      if (b.second > from) ends.push_back(b.second);
    }
  }
  std::sort(ends.begin(), ends.end());
  for (const double t : ends) {
    if (free_count(t, t + seconds) >= needed) return t;
  }
  RINGLET_THROW(Error, "simulated cores: no gap for ", needed, " of ", busy_.size(), " cores");
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
  for (auto& core : busy_) {
    core.erase(std::remove_if(core.begin(), core.end(),
                              [now](const Interval& b) { return b.second <= now; }),
               core.end());
    for (const Interval& b : core) first_end_ = std::min(first_end_, b.second);
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
