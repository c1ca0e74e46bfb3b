// Predictions from simulations, remembered by algorithm and size.
#include "model/predict.h"

#include <algorithm>
#include <atomic>
#include <bit>
#include <cstdio>
#include <future>
#include <limits>
#include <thread>

#include "collectives/fingerprint.h"
#include "core/error.h"

namespace ringlet::model {

using collectives::Algorithm;

Predictor::Predictor(Collective collective, NetworkShape shape, Profile profile,
                     std::vector<Algorithm> algorithms, bool in_place)
    : collective_(collective),
      shape_(shape),
      profile_(std::move(profile)),
      algorithms_(algorithms.empty() ? simulated_algorithms(collective, shape_, profile_)
                                     : std::move(algorithms)),
      in_place_(in_place) {}

// Simulated outside the lock: the threads of a sweep simulate at once (a map's elements
// stay where they are while others are added).
const Prediction& Predictor::at(Algorithm algorithm, std::size_t bytes) {
  const auto key = std::make_pair(algorithm, bytes);
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (auto it = done_.find(key); it != done_.end()) return it->second;
  }
  Prediction p{algorithm,
               simulate(SimCase{collective_, algorithm, shape_, bytes, in_place_}, profile_)};
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

std::vector<Algorithm> table_algorithms(const NetworkShape& shape, const Profile& profile) {
  std::vector<Algorithm> algorithms = simulated_algorithms(Collective::all_reduce, shape, profile);
  std::erase_if(algorithms, [](Algorithm a) { return !collectives::automatic_picks(a); });
  return algorithms;
}

// The ring's steps depend on each other two ways, and each way is a path of waits that no run
// of the ring can be shorter than, whatever else its ranks wait for (cores, wake-ups, NICs,
// which are left out):
//   - round the ring: a rank sends in step t + 1 what it received in step t, so a message
//     crosses link r -> r + 1, then r + 1 -> r + 2, ... (2(n - 1) links for an all-reduce,
//     n - 1 for an all-gather or reduce-scatter), each taking its link's latency and its chunk's
//     bytes on the wire after the one before arrived; every start on the ring is such a chain;
//   - on one link: a rank's chunks leave one after another, each its bytes on the wire, and the
//     last still has the latency to go.
// Either starts behind the op's fingerprint, which goes out on every link first, in a message of
// its own (collectives::checks_fingerprint_apart). The longest bounds the ring's time from below.
double ring_chain_seconds(Collective collective, const NetworkShape& shape, const Profile& p,
                          std::size_t bytes) {
  const int n = shape.ranks;
  if (n < 2) return 0;
  const std::size_t elements = (bytes + sizeof(float) - 1) / sizeof(float);
  // The smallest chunk: of the all-reduce's balanced split, or the others' blocks.
  const auto parts = static_cast<std::size_t>(n);
  const std::size_t per_rank =
      collective == Collective::all_reduce ? elements / parts : (elements + parts - 1) / parts;
  const std::size_t chunk = per_rank * sizeof(float);
  // The least time a message can take on the wire of a link (between hosts, the NICs' too).
  const auto on_wire = [&p](bool across, std::size_t message) {
    const double t = (across ? p.inter : p.intra).fastest_wire_seconds(message);
    return across ? std::max(t, static_cast<double>(message) / (p.nic_GBps * 1e9)) : t;
  };
  // Per link r -> r + 1: a chunk's wire time, its latency, the fingerprint's wire time.
  std::vector<double> wire(static_cast<std::size_t>(n)), latency(wire.size()), first(wire.size());
  for (std::size_t r = 0; r < wire.size(); ++r) {
    const bool across = shape.host_of(static_cast<int>(r)) !=
                        shape.host_of(static_cast<int>((r + 1) % wire.size()));
    wire[r] = on_wire(across, chunk);
    latency[r] = (across ? p.inter.latency_us : p.intra.latency_us) * 1e-6;
    first[r] = on_wire(across, sizeof(collectives::Fingerprint));
  }
  const int steps = collective == Collective::all_reduce ? 2 * (n - 1) : n - 1;
  double one_link = 0, lap = 0;
  for (std::size_t r = 0; r < wire.size(); ++r) {
    one_link = std::max(one_link, first[r] + steps * wire[r] + latency[r]);
    lap += wire[r] + latency[r];
  }
  // From link `start`: its fingerprint, whole laps, then the run of the remaining links (a window
  // sliding round the ring); the costliest start.
  const auto link = [&](int r) {
    const auto i = static_cast<std::size_t>(r % n);
    return wire[i] + latency[i];
  };
  const int rest = steps % n;
  double window = 0;
  for (int t = 0; t < rest; ++t) window += link(t);
  double costliest = first[0] + window;
  for (int start = 1; start < n; ++start) {
    if (rest > 0) window += link(start + rest - 1) - link(start - 1);
    costliest = std::max(costliest, first[static_cast<std::size_t>(start)] + window);
  }
  return std::max(one_link, (steps / n) * lap + costliest);
}

// A lower bound of an algorithm's time without simulating it; 0 where none is worked out.
double Predictor::bound(Algorithm algorithm, std::size_t bytes) const {
  if (algorithm != Algorithm::ring) return 0;
  return ring_chain_seconds(collective_, shape_, profile_, bytes);
}

// The algorithms with no bound are simulated first; one with a bound above the fastest time so
// far cannot be the fastest and is not simulated (at 1,024 ranks the ring's 2 million messages
// are most of a sweep's time, and its chain of steps alone rules it out below a megabyte).
Algorithm Predictor::fastest(std::size_t bytes) {
  std::map<Algorithm, double> bounds;
  for (const Algorithm a : algorithms_) bounds[a] = bound(a, bytes);
  std::vector<Algorithm> order = algorithms_;
  std::stable_partition(order.begin(), order.end(), [&](Algorithm a) { return bounds[a] == 0; });
  double best_time = std::numeric_limits<double>::infinity();
  for (const Algorithm a : order) {
    if (bounds[a] > best_time) continue;
    best_time = std::min(best_time, at(a, bytes).result.seconds);
  }
  // The first in algorithms()'s order at the fastest time.
  for (const Algorithm a : algorithms_) {
    if (bounds[a] <= best_time && at(a, bytes).result.seconds == best_time) return a;
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

// Every power of two from low to high, the largest first (the ring's simulations are there),
// shared among the machine's cores: each takes the next size not yet taken.
std::vector<SizeRange> Predictor::fastest_by_size(std::size_t low, std::size_t high) {
  RINGLET_CHECK(low >= 1 && low <= high, ValueError, "sizes from ", low, " to ", high,
                ": need 1 <= low <= high");
  const int lo = std::bit_width(low) - 1, hi = std::bit_width(high) - 1;
  std::vector<Algorithm> best(static_cast<std::size_t>(hi - lo + 1));
  std::atomic<int> next{hi};
  const auto work = [&] {
    for (int e = next--; e >= lo; e = next--) {
      best[static_cast<std::size_t>(e - lo)] = fastest(std::size_t{1} << e);
    }
  };
  const unsigned cores = std::max(1u, std::thread::hardware_concurrency());
  std::vector<std::future<void>> others;
  for (unsigned t = 1; t < std::min<unsigned>(cores, static_cast<unsigned>(best.size())); ++t) {
    others.push_back(std::async(std::launch::async, work));
  }
  work();
  for (auto& other : others) other.get();
  std::vector<SizeRange> out;
  for (int e = lo; e <= hi; ++e) {
    add_range(out,
              {std::size_t{1} << e, std::size_t{1} << e, best[static_cast<std::size_t>(e - lo)]});
  }
  return out;
}

// Whether `b` is faster than `a` at `bytes`; the one with a bound is simulated only where its
// bound does not settle it.
bool Predictor::faster(Algorithm b, Algorithm a, std::size_t bytes) {
  const auto t = [&](Algorithm x) { return at(x, bytes).result.seconds; };
  const double bound_a = bound(a, bytes), bound_b = bound(b, bytes);
  if (bound_a > 0 && bound_b == 0) {
    const double tb = t(b);
    return bound_a > tb || tb < t(a);
  }
  if (bound_b > 0 && bound_a == 0) {
    const double ta = t(a);
    return bound_b < ta && t(b) < ta;
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
