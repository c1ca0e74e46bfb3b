#include "core/cpu_round_trip.h"

#include <pthread.h>
#include <sched.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <thread>
#include <vector>

namespace ringlet::core {
namespace {

using Clock = std::chrono::steady_clock;

constexpr int kBatches = kRoundTripBatches;
constexpr auto kAnswerWait = std::chrono::milliseconds(kRoundTripAnswerMs);

// Pins the calling thread to `cpu`, waits (yielding, bounded) until the other side is pinned
// too, then raises itself to real-time priority where permitted. Raising only once both are
// pinned keeps either from holding the CPU the other must first run on to move away.
bool pin_and_raise(int cpu, std::atomic<int>& pinned) {
  if (cpu < 0 || cpu >= CPU_SETSIZE) return false;
  cpu_set_t one;
  CPU_ZERO(&one);
  CPU_SET(cpu, &one);
  if (pthread_setaffinity_np(pthread_self(), sizeof one, &one) != 0) return false;
  pinned.fetch_add(1);
  const auto since = Clock::now();
  while (pinned.load() < 2) {
    if (Clock::now() - since > kAnswerWait) return false;
    sched_yield();
  }
  const sched_param low_realtime{1};
  pthread_setschedparam(pthread_self(), SCHED_FIFO, &low_realtime);  // best effort
  return true;
}

// The line both threads bounce: round trip j is the measuring thread writing 2j + 1 and the
// echo thread answering 2j + 2.
struct alignas(64) Line {
  std::atomic<long> value{0};
};

// Spins until `line` holds `want`; false once kAnswerWait has passed without it.
bool await(const Line& line, long want) {
  const auto since = Clock::now();
  for (int spins = 1; line.value.load(std::memory_order_acquire) != want; ++spins) {
    if (spins % 1024 == 0 && Clock::now() - since > kAnswerWait) return false;
  }
  return true;
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

}  // namespace

double cpu_round_trip_ns(int cpu_a, int cpu_b, int trips) {
  Line line;
  std::atomic<int> pinned{0};
  const long per_batch = std::max(trips / kBatches, 1);
  const long all = per_batch * kBatches;
  std::thread echo([&] {
    if (!pin_and_raise(cpu_b, pinned)) return;
    for (long j = 0; j < all; ++j) {
      if (!await(line, 2 * j + 1)) return;
      line.value.store(2 * j + 2, std::memory_order_release);
    }
  });
  std::vector<double> batches;
  bool late = false;
  std::thread measure([&] {
    late = !pin_and_raise(cpu_a, pinned);
    for (long j = 0; j < all && !late; j += per_batch) {
      const auto start = Clock::now();
      for (long k = j; k < j + per_batch && !late; ++k) {
        line.value.store(2 * k + 1, std::memory_order_release);
        late = !await(line, 2 * k + 2);
      }
      const double ns = std::chrono::duration<double, std::nano>(Clock::now() - start).count();
      batches.push_back(ns / static_cast<double>(per_batch));
    }
  });
  measure.join();
  echo.join();
  return late || batches.empty() ? std::nan("") : median(batches);
}

}  // namespace ringlet::core
