// Predictions from simulations, remembered by algorithm and size.
#include "model/predict.h"

#include <algorithm>
#include <bit>
#include <cstdio>
#include <future>
#include <limits>

#include "core/error.h"

namespace ringlet::model {

using collectives::Algorithm;

Predictor::Predictor(Collective collective, NetworkShape shape, Profile profile,
                     std::vector<Algorithm> algorithms)
    : collective_(collective),
      shape_(shape),
      profile_(std::move(profile)),
      algorithms_(algorithms.empty() ? simulated_algorithms(collective, shape_, profile_)
                                     : std::move(algorithms)) {}

// Simulated outside the lock: two threads of a sweep may simulate at once (a map's elements
// stay where they are while others are added).
const Prediction& Predictor::at(Algorithm algorithm, std::size_t bytes) {
  const auto key = std::make_pair(algorithm, bytes);
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (auto it = done_.find(key); it != done_.end()) return it->second;
  }
  Prediction p{algorithm, simulate(SimCase{collective_, algorithm, shape_, bytes}, profile_)};
  p.bus_GBps = bus_bandwidth_GBps(collective_, shape_.ranks, p.result.bytes, p.result.seconds);
  std::lock_guard<std::mutex> lock(mutex_);
  const auto [it, added] = done_.emplace(key, p);
  if (added) wall_seconds_ += p.result.wall_seconds;
  return it->second;
}

std::vector<Prediction> Predictor::all(std::size_t bytes) {
  std::vector<Prediction> out;
  for (const Algorithm a : algorithms_) out.push_back(at(a, bytes));
  return out;
}

// side(): on a spare core while here(); else one after the other. The core is spare again as
// soon as side() is done, for here()'s own halves.
void Predictor::side_by_side(const std::function<void()>& side, const std::function<void()>& here) {
  if (spare_threads_.fetch_sub(1) <= 0) {
    spare_threads_.fetch_add(1);
    side();
    here();
    return;
  }
  auto other = std::async(std::launch::async, [&] {
    side();
    spare_threads_.fetch_add(1);
  });
  here();
  other.get();
}

// A lower bound of an algorithm's time without simulating it: its chain of messages each of
// which waits for the one before (the ring all-reduce's 2(n - 1) steps) at the smallest link
// latency; 0 where none is worked out.
double Predictor::bound(Algorithm algorithm) const {
  if (collective_ != Collective::all_reduce || algorithm != Algorithm::ring) return 0;
  const double latency = std::min(profile_.intra.latency_us, profile_.inter.latency_us) * 1e-6;
  return 2.0 * (shape_.ranks - 1) * latency;
}

// The algorithms with no bound are simulated first; one with a bound above the fastest time so
// far cannot be the fastest and is not simulated (at 1,024 ranks the ring's 2 million messages
// are most of a sweep's time, and its latency alone rules it out below megabytes).
Algorithm Predictor::fastest(std::size_t bytes) {
  std::vector<Algorithm> order = algorithms_;
  std::stable_partition(order.begin(), order.end(), [&](Algorithm a) { return bound(a) == 0; });
  double best_time = std::numeric_limits<double>::infinity();
  for (const Algorithm a : order) {
    if (bound(a) > best_time) continue;
    best_time = std::min(best_time, at(a, bytes).result.seconds);
  }
  // The first in algorithms()'s order at the fastest time.
  for (const Algorithm a : algorithms_) {
    if (bound(a) <= best_time && at(a, bytes).result.seconds == best_time) return a;
  }
  return algorithms_.front();
}

namespace {

// Appends a range, joining it to the last one where the same algorithm is fastest.
void add_range(std::vector<SizeRange>& out, SizeRange range) {
  if (!out.empty() && out.back().fastest == range.fastest) {
    out.back().last = range.last;
  } else {
    out.push_back(range);
  }
}

}  // namespace

// The halves of a range are searched side by side while a core is spare (the simulations are
// independent; each half's ranges are joined in order after).
void Predictor::bisect(int lo, int hi, std::vector<SizeRange>& out) {
  const Algorithm a = fastest(std::size_t{1} << lo), b = fastest(std::size_t{1} << hi);
  if (a == b || hi - lo <= 1) {
    add_range(out, {std::size_t{1} << lo, std::size_t{1} << (a == b ? hi : lo), a});
    if (a != b) add_range(out, {std::size_t{1} << hi, std::size_t{1} << hi, b});
    return;
  }
  const int mid = lo + (hi - lo) / 2;
  fastest(std::size_t{1} << mid);  // both halves start from it
  std::vector<SizeRange> left, right;
  side_by_side([&] { bisect(lo, mid, left); }, [&] { bisect(mid, hi, right); });
  for (const SizeRange& r : left) add_range(out, r);
  for (const SizeRange& r : right) add_range(out, r);
}

std::vector<SizeRange> Predictor::fastest_by_size(std::size_t low, std::size_t high) {
  RINGLET_CHECK(low >= 1 && low <= high, ValueError, "sizes from ", low, " to ", high,
                ": need 1 <= low <= high");
  std::vector<SizeRange> out;
  bisect(std::bit_width(low) - 1, std::bit_width(high) - 1, out);
  return out;
}

// Whether `b` is faster than `a` at `bytes`; the one with a bound is simulated only where its
// bound does not settle it.
bool Predictor::faster(Algorithm b, Algorithm a, std::size_t bytes) {
  const auto t = [&](Algorithm x) { return at(x, bytes).result.seconds; };
  if (bound(a) > 0 && bound(b) == 0) {
    const double tb = t(b);
    return bound(a) > tb || tb < t(a);
  }
  if (bound(b) > 0 && bound(a) == 0) {
    const double ta = t(a);
    return bound(b) < ta && t(b) < ta;
  }
  return t(b) < t(a);
}

std::optional<std::size_t> Predictor::crossover(Algorithm a, Algorithm b, std::size_t low,
                                                std::size_t high) {
  int lo = std::bit_width(low) - 1, hi = std::bit_width(high) - 1;
  const auto b_faster = [&](int e) { return faster(b, a, std::size_t{1} << e); };
  if (b_faster(lo) || !b_faster(hi)) return std::nullopt;
  while (hi - lo > 1) {
    const int mid = lo + (hi - lo) / 2;
    (b_faster(mid) ? hi : lo) = mid;
  }
  return std::size_t{1} << hi;
}

collectives::AlgorithmTable Predictor::table(std::size_t low, std::size_t high) {
  collectives::AlgorithmTable rows;
  const std::vector<SizeRange> ranges = fastest_by_size(low, high);
  for (std::size_t i = 0; i < ranges.size(); ++i) {
    rows.push_back({i + 1 < ranges.size() ? ranges[i].last : 0, ranges[i].fastest});
  }
  return rows;
}

std::string size_text(std::size_t bytes) {
  const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  double v = static_cast<double>(bytes);
  int u = 0;
  while (v >= 1024 && u < 4) {
    v /= 1024;
    ++u;
  }
  char text[32];
  std::snprintf(text, sizeof text,
                v == static_cast<double>(static_cast<long long>(v)) ? "%.0f %s" : "%.1f %s", v,
                units[u]);
  return text;
}

}  // namespace ringlet::model
