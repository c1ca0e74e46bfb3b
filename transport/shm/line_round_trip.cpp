#include "transport/shm/line_round_trip.h"

#include <algorithm>
#include <array>
#include <chrono>
#include <cmath>

namespace ringlet::transport {
namespace {

using Clock = std::chrono::steady_clock;

// Round trip j is side 0 writing 2j + 1 and side 1 answering 2j + 2; side 0 ends with kDone.
constexpr std::uint64_t kDone = ~std::uint64_t{0};
constexpr std::uint64_t kTrips = std::uint64_t{kLineTripBatches} * kLineTripsPerBatch;

// Spins until `line` holds `want` (true) or kDone, or `wait` passes (false).
bool await(const std::atomic<std::uint64_t>& line, std::uint64_t want,
           std::chrono::microseconds wait) {
  const auto since = Clock::now();
  for (int spins = 1;; ++spins) {
    const std::uint64_t value = line.load(std::memory_order_acquire);
    if (value == want) return true;
    if (value == kDone) return false;
    if (spins % 256 == 0 && Clock::now() - since > wait) {
      return false;
    }
  }
}

void echo(std::atomic<std::uint64_t>& line, std::chrono::microseconds wait) {
  for (std::uint64_t j = 0; j < kTrips && await(line, 2 * j + 1, wait); ++j) {
    line.store(2 * j + 2, std::memory_order_release);
  }
}

double measure(std::atomic<std::uint64_t>& line, std::chrono::microseconds wait) {
  std::array<double, kLineTripBatches> batches{};
  bool answered = true;
  for (std::uint64_t b = 0; b < kLineTripBatches && answered; ++b) {
    const auto start = Clock::now();
    for (std::uint64_t j = b * kLineTripsPerBatch; j < (b + 1) * kLineTripsPerBatch && answered;
         ++j) {
      line.store(2 * j + 1, std::memory_order_release);
      answered = await(line, 2 * j + 2, wait);
    }
    batches[b] =
        std::chrono::duration<double, std::nano>(Clock::now() - start).count() / kLineTripsPerBatch;
  }
  line.store(kDone, std::memory_order_release);  // side 1 stops echoing
  if (!answered) return std::nan("");
  return *std::min_element(batches.begin(), batches.end());
}

}  // namespace

double line_round_trip_ns(std::atomic<std::uint64_t>& line, int side,
                          std::chrono::microseconds answer_wait) {
  if (side != 0) {
    echo(line, answer_wait);
    return std::nan("");
  }
  return measure(line, answer_wait);
}

}  // namespace ringlet::transport
