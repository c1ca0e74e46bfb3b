// Two threads on two CPUs taking turns with one buffer (shared_lines.h).
#include "model/shared_lines.h"

#include <atomic>
#include <chrono>
#include <exception>
#include <thread>
#include <vector>

#include "core/copy.h"
#include "model/median.h"
#include "model/rank_threads.h"

namespace ringlet::model {

using Clock = std::chrono::steady_clock;

SharedRates shared_lines(std::size_t bytes, int turns) {
  const auto [first_cpu, second_cpu] = two_cpus();
  if (first_cpu < 0) return {};
  const int cpus[2] = {first_cpu, second_cpu};
  std::vector<char> from(bytes, 1), shared(bytes, 0), to(bytes, 0);
  std::atomic<int> turn{0};
  std::atomic<bool> late{false};
  std::vector<double> writes, reads;
  // Waits for `mine`: false when the other thread has not handed it over within a second.
  const auto await = [&](int mine) {
    const auto deadline = Clock::now() + std::chrono::seconds(1);
    while (turn.load(std::memory_order_acquire) != mine) {
      if (late.load(std::memory_order_relaxed) || Clock::now() > deadline) {
        late.store(true, std::memory_order_relaxed);
        return false;
      }
    }
    return true;
  };
  const auto timed = [bytes](std::vector<double>& times, char* dst, const char* src) {
    const auto start = Clock::now();
    core::copy(dst, src, bytes);
    times.push_back(std::chrono::duration<double>(Clock::now() - start).count());
  };
  // Each thread on its CPU; one that cannot be placed ends the measurement.
  const auto placed = [&](int cpu) {
    try {
      stay_on_cpu(cpu);
      return true;
    } catch (const std::exception&) {
      late.store(true);
      return false;
    }
  };
  std::thread reader([&] {
    if (!placed(cpus[1])) return;
    for (int k = 0; k < turns && await(1); ++k) {
      timed(reads, to.data(), shared.data());
      turn.store(0, std::memory_order_release);
    }
  });
  std::thread writer([&] {
    if (!placed(cpus[0])) return;
    for (int k = 0; k < turns && await(0); ++k) {
      timed(writes, shared.data(), from.data());
      turn.store(1, std::memory_order_release);
    }
  });
  writer.join();
  reader.join();
  if (late || writes.empty() || reads.empty()) return {};
  return {static_cast<double>(bytes) / median(writes) / 1e9,
          static_cast<double>(bytes) / median(reads) / 1e9};
}

}  // namespace ringlet::model
