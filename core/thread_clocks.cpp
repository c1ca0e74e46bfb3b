// Thread clocks: clock_gettime for CPU times, the run queue's wait from the scheduler's
// per-thread statistics (/proc/thread-self/schedstat: "cpu_ns runqueue_ns timeslices").
#include "core/thread_clocks.h"

#include <fcntl.h>
#include <time.h>
#include <unistd.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <limits>

namespace ringlet::core {
namespace {

double clock_ms(clockid_t id) {
  timespec t{};
  clock_gettime(id, &t);
  return static_cast<double>(t.tv_sec) * 1e3 + static_cast<double>(t.tv_nsec) / 1e6;
}

// The second field of the calling thread's schedstat, in ms; NaN where there is none.
double read_runqueue_ms() {
  const int fd = ::open("/proc/thread-self/schedstat", O_RDONLY | O_CLOEXEC);
  if (fd < 0) return std::numeric_limits<double>::quiet_NaN();
  char text[96];
  const ssize_t n = ::read(fd, text, sizeof text - 1);
  ::close(fd);
  unsigned long long on_cpu_ns = 0, waiting_ns = 0;
  if (n <= 0) return std::numeric_limits<double>::quiet_NaN();
  text[n] = '\0';
  if (std::sscanf(text, "%llu %llu", &on_cpu_ns, &waiting_ns) != 2) {
    return std::numeric_limits<double>::quiet_NaN();
  }
  return static_cast<double>(waiting_ns) / 1e6;
}

double steady_ms() {
  return std::chrono::duration<double, std::milli>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

}  // namespace

ThreadClocks ThreadClocks::now() {
  ThreadClocks c;
  c.wall_ms = steady_ms();
  c.cpu_ms = clock_ms(CLOCK_THREAD_CPUTIME_ID);
  c.runqueue_ms = read_runqueue_ms();
  c.process_cpu_ms = clock_ms(CLOCK_PROCESS_CPUTIME_ID);
  c.wall_end_ms = steady_ms();
  return c;
}

TimeSplit split_between(const ThreadClocks& from, const ThreadClocks& to) {
  TimeSplit s;
  s.wall_ms = to.wall_end_ms - from.wall_ms;
  s.computing_ms = to.cpu_ms - from.cpu_ms;
  s.preempted_ms = to.runqueue_ms - from.runqueue_ms;  // NaN if either is
  s.blocked_ms = s.wall_ms - s.computing_ms - (std::isnan(s.preempted_ms) ? 0 : s.preempted_ms);
  s.other_threads_ms = (to.process_cpu_ms - from.process_cpu_ms) - s.computing_ms;
  return s;
}

TimeSplit mean_split(const std::vector<TimeSplit>& splits) {
  TimeSplit m;
  if (splits.empty()) return m;
  for (const TimeSplit& s : splits) {
    m.wall_ms += s.wall_ms;
    m.computing_ms += s.computing_ms;
    m.preempted_ms += s.preempted_ms;
    m.blocked_ms += s.blocked_ms;
    m.other_threads_ms += s.other_threads_ms;
  }
  const double n = static_cast<double>(splits.size());
  m.wall_ms /= n;
  m.computing_ms /= n;
  m.preempted_ms /= n;
  m.blocked_ms /= n;
  m.other_threads_ms /= n;
  return m;
}

}  // namespace ringlet::core
