// Thread count from RINGLET_NUM_THREADS and a fork-join parallel_for on std::thread.
// Threads are started per call: the loops that use it run for milliseconds, so the ~20 us
// start cost is noise, and there is no pool to shut down.
#include "core/threads.h"

#include <algorithm>
#include <atomic>
#include <exception>
#include <mutex>
#include <thread>
#include <vector>

#include "core/env.h"

namespace ringlet::core {
namespace {

std::atomic<int>& thread_setting() {
  static std::atomic<int> setting{static_cast<int>(
      env_int("RINGLET_NUM_THREADS", std::max(1u, std::thread::hardware_concurrency()), 1, 1024))};
  return setting;
}

}  // namespace

int num_threads() { return thread_setting().load(); }

void set_num_threads(int n) { thread_setting().store(std::max(1, n)); }

void parallel_for(std::int64_t n, std::int64_t grain,
                  const std::function<void(std::int64_t, std::int64_t)>& fn) {
  if (n <= 0) return;
  grain = std::max<std::int64_t>(grain, 1);
  const std::int64_t workers = std::min<std::int64_t>(num_threads(), (n + grain - 1) / grain);
  if (workers <= 1) {
    fn(0, n);
    return;
  }
  const std::int64_t chunk = (n + workers - 1) / workers;
  std::exception_ptr error;
  std::mutex error_mutex;
  auto run = [&](std::int64_t begin) {
    try {
      fn(begin, std::min(n, begin + chunk));
    } catch (...) {
      std::lock_guard lock(error_mutex);
      if (!error) error = std::current_exception();
    }
  };
  std::vector<std::thread> threads;
  for (std::int64_t w = 1; w < workers; ++w) threads.emplace_back(run, w * chunk);
  run(0);
  for (auto& t : threads) t.join();
  if (error) std::rethrow_exception(error);
}

}  // namespace ringlet::core
