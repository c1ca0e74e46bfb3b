// core_probe: how far apart two CPUs are, from the round trip of one cache line between two
// threads pinned to them; once, or as a monitor that samples it every few tenths of a second.
//
// On a virtual machine the host decides where the virtual CPUs run, and it moves them while a
// job runs. On the 2-core machines this project is measured on, the round trip is 40-160 ns
// while the two vCPUs are near (SMT siblings of one physical core, about 60 ns, or cores that
// share a cache, about 100-140 ns: the samples do not separate these two cleanly) and 400-570 ns
// while they sit apart (on different dies); the shared-memory and
// loopback all-reduce of every implementation follows it (2-4x between the last two). So the
// benchmarks that compare implementations run this monitor beside them and compare only runs
// made in the same placement (bench/compare_peers.sh and compare_peers.py).
//
// A sample is core::cpu_round_trip_ns (core/cpu_round_trip.h): the median of 25 batches of
// --trips / 25 round trips, at real-time priority where permitted; nan where a partner does not
// answer within 50 ms.
#include <sched.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <string>
#include <thread>
#include <vector>

#include "bench/kernel_bench_args.h"
#include "bench/program_main.h"
#include "core/cpu_round_trip.h"
#include "core/env.h"
#include "core/error.h"

namespace ringlet::bench {
namespace {

using Clock = std::chrono::steady_clock;

constexpr int kBatches = core::kRoundTripBatches;
constexpr int kAnswerWaitMs = core::kRoundTripAnswerMs;
constexpr double kLongestMonitor = 24 * 3600.0;  // seconds

const char* const kUsage =
    "usage: core_probe [--cpus A,B] [--trips N] [--every SECONDS --for SECONDS]\n"
    "  The round trip of one cache line between threads pinned to CPUs A and B (default: the\n"
    "  first two this process may run on), in ns: the median of 25 batches of N/25 trips\n"
    "  (--trips, default 500), and the placement it suggests on this machine kind (roughly: same\n"
    "  core < 90 ns <= shared cache < 300 ns <= apart; only the 300 ns split is sharp).\n"
    "  Once: a line for people and a JSON line. --every S --for T: a monitor, one line\n"
    "  '<unix time in s> <round trip in ns, or nan>' every S seconds (>= 0.01) for T seconds\n"
    "  (<= 86400), each line flushed.\n";

struct Options {
  int cpu_a = -1, cpu_b = -1;
  int trips = 500;
  double every = 0;     // seconds between samples; 0: one sample
  double duration = 0;  // seconds the monitor runs
};

cpu_set_t allowed_cpus() {
  cpu_set_t allowed;
  RINGLET_CHECK(sched_getaffinity(0, sizeof allowed, &allowed) == 0, Error,
                "cannot read this process's CPU affinity");
  return allowed;
}

// --cpus names CPUs this process may run on (a usage error otherwise).
void check_named_cpus(const Options& o) {
  if (o.cpu_a < 0) return;
  const cpu_set_t allowed = allowed_cpus();
  for (int c : {o.cpu_a, o.cpu_b}) {
    RINGLET_CHECK(CPU_ISSET(c, &allowed), ValueError, "--cpus: CPU ", c,
                  " is not one this process may run on");
  }
}

// The first two CPUs this process may run on, where --cpus named none.
void choose_cpus(Options& o) {
  if (o.cpu_a >= 0) return;
  const cpu_set_t allowed = allowed_cpus();
  std::vector<int> cpus;
  for (int c = 0; c < CPU_SETSIZE; ++c) {
    if (CPU_ISSET(c, &allowed)) cpus.push_back(c);
  }
  RINGLET_CHECK(cpus.size() >= 2, Error, "needs two CPUs to run on; this process may use ",
                cpus.size());
  o.cpu_a = cpus[0];
  o.cpu_b = cpus[1];
}

// The whole of `text` as a finite number of seconds, else a usage error naming the flag.
double parse_seconds(const std::string& flag, const std::string& text) {
  std::size_t used = 0;
  double v = 0;
  try {
    v = std::stod(text, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  RINGLET_CHECK(used == text.size() && used > 0 && std::isfinite(v), ValueError, flag,
                " wants a number of seconds, got '", text, "'");
  return v;
}

Options parse(int argc, char** argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    const std::string flag = argv[i];
    RINGLET_CHECK(i + 1 < argc, ValueError, "unknown flag or missing value: ", flag);
    const std::string value = argv[++i];
    if (flag == "--cpus") {
      const std::vector<std::string> cpus = split_commas(value);
      RINGLET_CHECK(cpus.size() == 2, ValueError, "--cpus wants two CPUs A,B, got '", value, "'");
      o.cpu_a = static_cast<int>(
          std::clamp<std::int64_t>(core::parse_int(cpus[0], "--cpus"), -1, CPU_SETSIZE));
      o.cpu_b = static_cast<int>(
          std::clamp<std::int64_t>(core::parse_int(cpus[1], "--cpus"), -1, CPU_SETSIZE));
      RINGLET_CHECK(o.cpu_a >= 0 && o.cpu_b >= 0 && o.cpu_a != o.cpu_b && o.cpu_a < CPU_SETSIZE &&
                        o.cpu_b < CPU_SETSIZE,
                    ValueError, "--cpus wants two different CPU numbers, got '", value, "'");
    } else if (flag == "--trips") {
      const std::int64_t trips = core::parse_int(value, flag);
      RINGLET_CHECK(trips >= kBatches && trips <= 1000000, ValueError,
                    "--trips must be in [25, 1000000], got ", trips);
      o.trips = static_cast<int>(trips);
    } else if (flag == "--every") {
      o.every = parse_seconds(flag, value);
      RINGLET_CHECK(o.every >= 0.01, ValueError, "--every must be at least 0.01 s, got ", value);
    } else if (flag == "--for") {
      o.duration = parse_seconds(flag, value);
      RINGLET_CHECK(o.duration > 0 && o.duration <= kLongestMonitor, ValueError,
                    "--for must be in (0, 86400] seconds, got ", value);
    } else {
      RINGLET_THROW(ValueError, "unknown flag ", flag);
    }
  }
  RINGLET_CHECK((o.every > 0) == (o.duration > 0), ValueError,
                "--every and --for go together (a monitor samples every S seconds for T seconds)");
  check_named_cpus(o);
  return o;
}

const char* placement(double ns) {
  if (std::isnan(ns)) return "unknown";
  if (ns < 90) return "same core";
  if (ns < 300) return "shared cache";
  return "apart";
}

double unix_seconds() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

int run_once(const Options& o) {
  const double ns = core::cpu_round_trip_ns(o.cpu_a, o.cpu_b, o.trips);
  std::printf("# core_probe cpus %d,%d: round trip %.0f ns (%s)\n", o.cpu_a, o.cpu_b, ns,
              placement(ns));
  if (std::isnan(ns)) {
    std::fprintf(stderr, "core_probe: CPU %d or %d did not answer within %d ms\n", o.cpu_a, o.cpu_b,
                 kAnswerWaitMs);
  }
  std::printf(
      "{\"bench\":\"core_probe\",\"cpus\":[%d,%d],\"trips\":%d,\"round_trip_ns\":%s,"
      "\"placement\":\"%s\"}\n",
      o.cpu_a, o.cpu_b, o.trips, std::isnan(ns) ? "null" : std::to_string(ns).c_str(),
      placement(ns));
  return std::isnan(ns) ? 1 : 0;
}

int run_monitor(const Options& o) {
  std::printf("# core_probe cpus %d,%d every %g s for %g s: unix_time round_trip_ns\n", o.cpu_a,
              o.cpu_b, o.every, o.duration);
  std::fflush(stdout);
  const auto start = Clock::now();
  const auto end = start + std::chrono::duration<double>(o.duration);
  const auto tick = [&](double k) {
    return start +
           std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(o.every * k));
  };
  for (auto at = start; at < end;) {
    std::this_thread::sleep_until(at);
    const double t = unix_seconds();
    const double ns = core::cpu_round_trip_ns(o.cpu_a, o.cpu_b, o.trips);
    std::printf("%.3f %.1f\n", t, ns);
    std::fflush(stdout);
    // The next tick after now: a sample that ran long (a partner late) skips ticks rather
    // than catching up on them back to back.
    const double since = std::chrono::duration<double>(Clock::now() - start).count();
    at = tick(std::floor(since / o.every) + 1);
  }
  return 0;
}

int run(Options o) {
  choose_cpus(o);
  return o.every > 0 ? run_monitor(o) : run_once(o);
}

}  // namespace
}  // namespace ringlet::bench

int main(int argc, char** argv) {
  return ringlet::bench::program_main("core_probe", ringlet::bench::kUsage, argc, argv,
                                      ringlet::bench::parse, ringlet::bench::run);
}
