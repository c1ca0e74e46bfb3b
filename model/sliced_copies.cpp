// All cores copying at once, slice by slice, over buffers of growing size: where the rate falls
// from the cache's to the memory's.
#include "model/sliced_copies.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <thread>

#include "core/copy.h"
#include "core/page_buffer.h"

namespace ringlet::model {
namespace {

constexpr std::size_t kSlice = 256 * 1024;  // the shm ring's publish granularity
// Each run copies at least this much per core, going over a small buffer several times.
constexpr std::size_t kRunBytes = std::size_t{64} << 20;

// As the collectives copy a message's slices (core::copy).
void copy_sliced(char* to, const char* from, std::size_t bytes, std::size_t slice) {
  for (std::size_t at = 0; at < bytes; at += slice) {
    core::copy(to + at, from + at, std::min(slice, bytes - at));
  }
}

}  // namespace

double all_cores_copying_GBps(int cores, std::size_t per_core, std::size_t slice, int runs) {
  // Each side at a page: the copies' speed is the memory's, not the gap's (core/page_buffer.h).
  std::vector<core::PageBuffer> from, to;
  for (int t = 0; t < cores; ++t) {
    from.emplace_back(per_core, 1);
    to.emplace_back(per_core, 0);
  }
  const std::size_t passes = std::max<std::size_t>(1, kRunBytes / per_core);
  std::vector<double> seconds;
  for (int run = 0; run < runs + 1; ++run) {  // the first warms the buffers up, untimed
    const auto start = std::chrono::steady_clock::now();
    std::vector<std::thread> copiers;
    for (std::size_t t = 0; t < from.size(); ++t) {
      copiers.emplace_back([&, t] {
        for (std::size_t p = 0; p < passes; ++p)
          copy_sliced(to[t].data(), from[t].data(), per_core, slice);
      });
    }
    for (auto& c : copiers) c.join();
    const std::chrono::duration<double> took = std::chrono::steady_clock::now() - start;
    if (run > 0) seconds.push_back(took.count());
  }
  std::sort(seconds.begin(), seconds.end());
  const double bytes = static_cast<double>(per_core * passes) * cores;
  return bytes / seconds[seconds.size() / 2] / 1e9;
}

SlicedCopies sliced_knee(std::vector<SlicedRate> rates, int cores) {
  SlicedCopies out;
  std::sort(rates.begin(), rates.end(), [](const SlicedRate& a, const SlicedRate& b) {
    return a.per_core_bytes < b.per_core_bytes;
  });
  out.rates = rates;
  if (rates.size() < 2) return out;
  const double cached = rates.front().GBps, past = rates.back().GBps;
  if (past > 0.75 * cached) return out;  // no knee among these sizes
  // Where the rate first falls below halfway: between that size and the one before, in
  // proportion to the rate along the powers of two.
  const double halfway = (cached + past) / 2;
  std::size_t k = 1;
  while (rates[k].GBps >= halfway) ++k;  // the last one is below
  const SlicedRate &above = rates[k - 1], &below = rates[k];
  const double along = (above.GBps - halfway) / (above.GBps - below.GBps);
  const double per_core = static_cast<double>(above.per_core_bytes) *
                          std::pow(static_cast<double>(below.per_core_bytes) /
                                       static_cast<double>(above.per_core_bytes),
                                   along);
  out.last_level_bytes = static_cast<std::size_t>(2 * per_core * cores);
  out.past_GBps = past;
  return out;
}

SlicedCopies measure_sliced_copies(int cores, std::size_t least_per_core, std::size_t most_per_core,
                                   int runs) {
  std::vector<SlicedRate> rates;
  for (std::size_t per_core = least_per_core; per_core <= most_per_core; per_core *= 2) {
    rates.push_back({per_core, all_cores_copying_GBps(cores, per_core, kSlice, runs)});
  }
  return sliced_knee(std::move(rates), cores);
}

}  // namespace ringlet::model
