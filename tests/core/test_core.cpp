// core/: copy and copy_bytes, page buffers, dtype metadata and f16/bf16 conversions, env parsing
// errors, deadlines, parallel_for, random_u64, thread clocks (computing, preempted, blocked).
#include <doctest/doctest.h>
#include <sched.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <fstream>
#include <limits>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "core/copy.h"
#include "core/cpu_round_trip.h"
#include "core/deadline.h"
#include "core/dtype.h"
#include "core/env.h"
#include "core/error.h"
#include "core/isa.h"
#include "core/page_buffer.h"
#include "core/random.h"
#include "core/thread_clocks.h"
#include "core/thread_name.h"
#include "core/threads.h"

using namespace ringlet::core;

TEST_CASE("copy_bytes copies every size and alignment exactly, and nothing beyond") {
  std::vector<unsigned char> src(1000), dst(1100);
  for (std::size_t i = 0; i < src.size(); ++i) src[i] = static_cast<unsigned char>(i * 37 + 11);
  for (std::size_t n : {0, 1, 15, 63, 64, 65, 127, 128, 200, 777}) {
    for (std::size_t from : {0, 1, 8, 33}) {
      for (std::size_t to : {0, 3, 16, 61}) {
        std::fill(dst.begin(), dst.end(), 0xAB);
        copy_bytes(dst.data() + to, src.data() + from, n);
        for (std::size_t i = 0; i < dst.size(); ++i) {
          const bool inside = i >= to && i < to + n;
          const unsigned expected = inside ? src[from + i - to] : 0xAB;
          if (dst[i] != expected) {
            FAIL("n=", n, " from=", from, " to=", to, ": byte ", i, " is ", int(dst[i]),
                 ", expected ", expected);
          }
        }
      }
    }
  }
}

TEST_CASE("copy: the gaps where rep movsb crawls, and every size and gap copied exactly") {
  // The gap is the destination's distance past the source modulo a 4 KiB page.
  alignas(4096) static unsigned char page[3 * 4096];
  CHECK_FALSE(copy_gap_is_slow(page + 4096, page));  // a whole page: no gap
  CHECK(copy_gap_is_slow(page + 8, page));
  CHECK(copy_gap_is_slow(page + 4096 + 16, page));
  CHECK(copy_gap_is_slow(page + 63, page));
  CHECK_FALSE(copy_gap_is_slow(page + 64, page));
  CHECK_FALSE(copy_gap_is_slow(page, page + 8));  // the destination before the source
  CHECK_FALSE(copy_gap_is_slow(page + 2048, page));
  // memcpy, and at a slow gap the loop where the probe finds memcpy crawling (the test above
  // checks the loop itself), from below glibc's rep movsb size up.
  std::vector<unsigned char> src(80000), dst(80000 + 4096 + 128);
  for (std::size_t i = 0; i < src.size(); ++i) src[i] = static_cast<unsigned char>(i * 37 + 11);
  for (std::size_t n : {std::size_t{0}, std::size_t{100}, std::size_t{2047}, std::size_t{2048},
                        std::size_t{4096 + 13}, src.size()}) {
    for (std::size_t gap : {0, 8, 16, 31, 63, 64, 100}) {
      std::fill(dst.begin(), dst.end(), 0xAB);
      // dst + to lies `gap` bytes past src modulo a page.
      const auto base = reinterpret_cast<std::uintptr_t>(dst.data());
      const auto want = (reinterpret_cast<std::uintptr_t>(src.data()) + gap) & 4095u;
      const std::size_t to = (want - (base & 4095u)) & 4095u;
      CHECK(copy_gap_is_slow(dst.data() + to, src.data()) == (gap != 0 && gap < 64));
      copy(dst.data() + to, src.data(), n);
      const bool exact = std::equal(src.begin(), src.begin() + static_cast<std::ptrdiff_t>(n),
                                    dst.begin() + static_cast<std::ptrdiff_t>(to));
      const bool before = std::all_of(dst.begin(), dst.begin() + static_cast<std::ptrdiff_t>(to),
                                      [](unsigned char b) { return b == 0xAB; });
      const bool after = std::all_of(dst.begin() + static_cast<std::ptrdiff_t>(to + n), dst.end(),
                                     [](unsigned char b) { return b == 0xAB; });
      CHECK_MESSAGE((exact && before && after), "n=", n, " gap=", gap);
    }
  }
  // Nothing to copy: an empty buffer's pointer may be null (a count-0 collective's), as
  // copy_bytes allows; memcpy may not be given one.
  std::fill(dst.begin(), dst.end(), 0xAB);
  copy(nullptr, nullptr, 0);
  copy(dst.data(), nullptr, 0);
  CHECK(dst[0] == 0xAB);
}

TEST_CASE("name_this_thread: the name the kernel shows for the thread, cut to 15 characters") {
  std::string named, comm;
  std::thread([&] {
    name_this_thread("rl-a-name-longer-than-fifteen");
    named = this_thread_name();
    std::ifstream in("/proc/thread-self/comm");
    std::getline(in, comm);
  }).join();
  CHECK(named == "rl-a-name-longe");
  CHECK(comm == named);
  CHECK(this_thread_name() != named);  // the caller's own name is its own
}

TEST_CASE("PageBuffer: at a page, every byte filled, and two of them at no gap") {
  // Two heap buffers allocated one after the other lie 16 bytes apart modulo a page, a gap where
  // memcpy crawls; page buffers never do, whatever the heap held before.
  std::vector<std::vector<char>> heap;
  for (int i = 0; i < 8; ++i) heap.emplace_back(static_cast<std::size_t>(4096 * (i + 1) + 16 * i));
  for (const std::size_t bytes :
       {std::size_t{1}, std::size_t{4095}, std::size_t{4096}, std::size_t{(1 << 20) + 8}}) {
    const PageBuffer a(bytes, 7), b(bytes, 9);
    CHECK(reinterpret_cast<std::uintptr_t>(a.data()) % kPageBytes == 0);
    CHECK(reinterpret_cast<std::uintptr_t>(b.data()) % kPageBytes == 0);
    CHECK_FALSE(copy_gap_is_slow(b.data(), a.data()));
    CHECK(a.size() == bytes);
    CHECK(std::all_of(a.data(), a.data() + bytes, [](char c) { return c == 7; }));
    CHECK(std::all_of(b.data(), b.data() + bytes, [](char c) { return c == 9; }));
  }
  CHECK(PageBuffer().data() == nullptr);
  CHECK(PageBuffer(0, 1).data() != nullptr);  // a page all the same
}

TEST_CASE("dtype sizes and names") {
  CHECK(dtype_size(DType::f32) == 4);
  CHECK(dtype_size(DType::f64) == 8);
  CHECK(dtype_size(DType::f16) == 2);
  CHECK(dtype_size(DType::bf16) == 2);
  CHECK(dtype_size(DType::i64) == 8);
  CHECK(dtype_size(DType::i32) == 4);
  CHECK(dtype_size(DType::u8) == 1);
  CHECK(dtype_name(DType::bf16) == "bf16");
  CHECK(is_floating(DType::f16));
  CHECK_FALSE(is_floating(DType::i32));
}

TEST_CASE("f16 conversion: exact values, rounding, subnormals, overflow") {
  CHECK(float_to_half(1.0f) == 0x3c00);
  CHECK(float_to_half(-2.0f) == 0xc000);
  CHECK(float_to_half(65504.0f) == 0x7bff);                // largest finite half
  CHECK(float_to_half(65520.0f) == 0x7c00);                // rounds to inf
  CHECK(float_to_half(5.960464477539063e-08f) == 0x0001);  // smallest subnormal
  CHECK(float_to_half(0.0f) == 0x0000);
  CHECK(half_to_float(0x3555) == doctest::Approx(0.333251953125));
  CHECK(half_to_float(0x0001) == doctest::Approx(5.960464477539063e-08));
  CHECK(std::isinf(half_to_float(0x7c00)));
  CHECK(std::isnan(half_to_float(float_to_half(std::numeric_limits<float>::quiet_NaN()))));
  // 1 + 2^-11 is halfway between 1 and 1 + 2^-10: ties go to even (1.0).
  CHECK(float_to_half(1.0f + 0x1.0p-11f) == 0x3c00);
  CHECK(float_to_half(1.0f + 0x1.8p-11f) == 0x3c01);
  // every half value survives a round trip
  for (std::uint32_t bits = 0; bits < 0x10000; ++bits) {
    const auto h = static_cast<std::uint16_t>(bits);
    const float f = half_to_float(h);
    if (std::isnan(f)) continue;
    REQUIRE(float_to_half(f) == h);
  }
}

TEST_CASE("bf16 conversion rounds to nearest even") {
  CHECK(float_to_bf16(1.0f) == 0x3f80);
  CHECK(bf16_to_float(0x3f80) == 1.0f);
  CHECK(float_to_bf16(1.0f + 0x1.0p-8f) == 0x3f80);  // tie -> even
  CHECK(float_to_bf16(1.0f + 0x1.8p-8f) == 0x3f81);
  CHECK(bf16_to_float(float_to_bf16(3.140625f)) == 3.140625f);
}

TEST_CASE("env_int names the variable and the value") {
  ::setenv("RINGLET_TEST_INT", "12x", 1);
  CHECK_THROWS_WITH_AS(env_int("RINGLET_TEST_INT", 1, 0, 100),
                       doctest::Contains("RINGLET_TEST_INT: expected an integer, got '12x'"),
                       ValueError);
  ::setenv("RINGLET_TEST_INT", "500", 1);
  CHECK_THROWS_WITH_AS(env_int("RINGLET_TEST_INT", 1, 0, 100),
                       doctest::Contains("RINGLET_TEST_INT=500 is out of range"), ValueError);
  ::setenv("RINGLET_TEST_INT", "42", 1);
  CHECK(env_int("RINGLET_TEST_INT", 1, 0, 100) == 42);
  ::unsetenv("RINGLET_TEST_INT");
  CHECK(env_int("RINGLET_TEST_INT", 7, 0, 100) == 7);
}

TEST_CASE("deadline") {
  CHECK(Deadline::after(std::chrono::seconds(0)).expired());
  const auto d = Deadline::after(std::chrono::hours(1));
  CHECK_FALSE(d.expired());
  CHECK(d.remaining() > std::chrono::minutes(59));
  CHECK_FALSE(Deadline::never().expired());
}

TEST_CASE("random_u64 draws differ and fill both halves") {
  // 64 draws of 64 bits: a repeat, or a half that is always zero, means a broken source.
  std::set<std::uint64_t> seen;
  std::uint64_t high = 0, low = 0;
  for (int i = 0; i < 64; ++i) {
    const std::uint64_t v = random_u64();
    seen.insert(v);
    high |= v >> 32;
    low |= v & 0xffffffffu;
  }
  CHECK(seen.size() == 64);
  CHECK(high != 0);
  CHECK(low != 0);
}

TEST_CASE("parallel_for covers the range once and rethrows") {
  set_num_threads(2);
  std::vector<std::atomic<int>> hits(1000);
  parallel_for(1000, 10, [&](std::int64_t b, std::int64_t e) {
    for (auto i = b; i < e; ++i) hits[i]++;
  });
  for (auto& h : hits) REQUIRE(h.load() == 1);
  CHECK_THROWS_WITH(parallel_for(100, 1,
                                 [](std::int64_t b, std::int64_t) {
                                   if (b > 0) throw ValueError("boom");
                                 }),
                    "boom");
}

TEST_CASE("instruction-set levels: names, parsing, what this CPU runs, RINGLET_ISA") {
  using ringlet::core::Isa;
  for (const Isa isa : {Isa::baseline, Isa::avx2, Isa::avx512}) {
    CHECK(ringlet::core::parse_isa(ringlet::core::isa_name(isa), "test") == isa);
  }
  try {
    ringlet::core::parse_isa("avx1024", "RINGLET_ISA");
    FAIL("avx1024 was accepted");
  } catch (const ringlet::core::ValueError& e) {
    const std::string message = e.what();
    CHECK(message.find("RINGLET_ISA") != std::string::npos);
    CHECK(message.find("'avx1024'") != std::string::npos);
    CHECK(message.find("baseline, avx2, avx512") != std::string::npos);
  }
  const auto levels = ringlet::core::supported_isas();
  REQUIRE(!levels.empty());
  CHECK(levels.front() == Isa::baseline);
  CHECK(ringlet::core::missing_isa_features(Isa::baseline).empty());
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
  // A second opinion: GCC's own detection (libgcc's CPUID and XGETBV reading).
  __builtin_cpu_init();
  const bool gcc_avx2 = __builtin_cpu_supports("avx") && __builtin_cpu_supports("avx2") &&
                        __builtin_cpu_supports("fma") && __builtin_cpu_supports("f16c");
  const bool gcc_avx512 = gcc_avx2 && __builtin_cpu_supports("avx512f") &&
                          __builtin_cpu_supports("avx512bw") &&
                          __builtin_cpu_supports("avx512dq") && __builtin_cpu_supports("avx512vl");
  CHECK(ringlet::core::isa_supported(Isa::avx2) == gcc_avx2);
  CHECK(ringlet::core::isa_supported(Isa::avx512) == gcc_avx512);
  CHECK(levels.size() == 1u + gcc_avx2 + gcc_avx512);
#endif
  const char* forced = std::getenv("RINGLET_ISA");
  const Isa want = forced != nullptr && *forced != '\0' ? ringlet::core::parse_isa(forced, "env")
                                                        : levels.back();
  CHECK(ringlet::core::active_isa() == want);
  MESSAGE("instruction-set level in use: ", ringlet::core::isa_name(ringlet::core::active_isa()));
}

namespace {

// Spins on the steady clock for `ms` (computing or preempted, never asleep).
void spin_for(double ms) {
  const auto until =
      std::chrono::steady_clock::now() + std::chrono::duration<double, std::milli>(ms);
  while (std::chrono::steady_clock::now() < until) {
  }
}

}  // namespace

TEST_CASE("thread clocks: asleep is blocked, spinning is not, other threads' CPU is counted") {
  const ThreadClocks start = ThreadClocks::now();
  std::this_thread::sleep_for(std::chrono::milliseconds(30));
  CHECK(start.wall_end_ms >= start.wall_ms);
  const TimeSplit slept = split_between(start, ThreadClocks::now());
  CHECK(slept.wall_ms >= 30.0);
  CHECK(slept.computing_ms < 5.0);
  CHECK(slept.blocked_ms >= 20.0);

  // A VM's host may take the CPU from a spinning thread (steal time): that shows as neither
  // computing nor preempted, so the spin is tried up to five times, for one the host left alone.
  TimeSplit spun{};
  for (int attempt = 0; attempt < 5; ++attempt) {
    const ThreadClocks before_spin = ThreadClocks::now();
    spin_for(30);
    spun = split_between(before_spin, ThreadClocks::now());
    const double on_cpu =
        spun.computing_ms + (std::isnan(spun.preempted_ms) ? 0 : spun.preempted_ms);
    if (spun.blocked_ms < 10.0 && on_cpu >= 25.0) break;
  }
  CHECK(spun.blocked_ms < 10.0);
  if (std::isnan(spun.preempted_ms)) {
    MESSAGE("no /proc/thread-self/schedstat here: preempted is unknown (NaN), inside blocked");
  } else {
    CHECK(spun.preempted_ms >= 0.0);
    CHECK(spun.computing_ms + spun.preempted_ms >= 25.0);
  }

  // Another thread burns 20 ms of its own CPU time while this one waits for it.
  const ThreadClocks before_join = ThreadClocks::now();
  std::thread worker([] {
    const ThreadClocks mine = ThreadClocks::now();
    while (ThreadClocks::now().cpu_ms - mine.cpu_ms < 20.0) {
    }
  });
  worker.join();
  const TimeSplit joined = split_between(before_join, ThreadClocks::now());
  CHECK(joined.other_threads_ms >= 19.0);
  CHECK(joined.computing_ms < joined.other_threads_ms);
}

TEST_CASE("thread clocks: splits add up, means are per field, an unknown run queue stays NaN") {
  ThreadClocks a, b;
  a.wall_ms = 100;
  a.cpu_ms = 10;
  a.runqueue_ms = 1;
  a.process_cpu_ms = 12;
  b.wall_ms = 149;
  b.wall_end_ms = 150;  // a split's wall runs from the first reading's start to the second's end
  b.cpu_ms = 40;
  b.runqueue_ms = 5;
  b.process_cpu_ms = 45;
  const TimeSplit s = split_between(a, b);
  CHECK(s.wall_ms == doctest::Approx(50));
  CHECK(s.computing_ms == doctest::Approx(30));
  CHECK(s.preempted_ms == doctest::Approx(4));
  CHECK(s.blocked_ms == doctest::Approx(16));
  CHECK(s.other_threads_ms == doctest::Approx(3));

  TimeSplit t;
  t.wall_ms = 70;
  t.computing_ms = 50;
  t.preempted_ms = 0;
  t.blocked_ms = 20;
  t.other_threads_ms = 1;
  const TimeSplit m = mean_split({s, t});
  CHECK(m.wall_ms == doctest::Approx(60));
  CHECK(m.computing_ms == doctest::Approx(40));
  CHECK(m.preempted_ms == doctest::Approx(2));
  CHECK(m.blocked_ms == doctest::Approx(18));
  CHECK(m.other_threads_ms == doctest::Approx(2));
  CHECK(mean_split({}).wall_ms == 0.0);

  b.runqueue_ms = std::numeric_limits<double>::quiet_NaN();
  const TimeSplit unknown = split_between(a, b);
  CHECK(std::isnan(unknown.preempted_ms));
  CHECK(unknown.blocked_ms == doctest::Approx(20));  // wall - computing: preempted inside
  CHECK(std::isnan(mean_split({unknown, t}).preempted_ms));
}

// The first `most` CPUs this process may run on; fewer where it has fewer.
std::vector<int> allowed_cpus(std::size_t most) {
  cpu_set_t allowed;
  std::vector<int> cpus;
  if (sched_getaffinity(0, sizeof allowed, &allowed) != 0) return cpus;
  for (int c = 0; c < CPU_SETSIZE && cpus.size() < most; ++c) {
    if (CPU_ISSET(c, &allowed)) cpus.push_back(c);
  }
  return cpus;
}

TEST_CASE("cpu_round_trip_ns: a CPU it cannot use gives NaN, without waiting past its 50 ms") {
  const int cpu = allowed_cpus(1).at(0);
  const auto start = std::chrono::steady_clock::now();
  CHECK(std::isnan(ringlet::core::cpu_round_trip_ns(cpu, -1)));
  CHECK(std::isnan(ringlet::core::cpu_round_trip_ns(CPU_SETSIZE, cpu)));
  CHECK(std::chrono::steady_clock::now() - start < std::chrono::seconds(5));
}

TEST_CASE("cpu_round_trip_ns: a line between two CPUs takes a finite time" *
          doctest::skip(allowed_cpus(2).size() < 2) * doctest::description("needs two CPUs")) {
  const std::vector<int> cpus = allowed_cpus(2);
  // On a busy machine a thread can wait past the 50 ms limit for its CPU, and the sample is NaN
  // as documented: the first finite one of a few.
  double ns = std::nan("");
  for (int attempt = 0; attempt < 10 && std::isnan(ns); ++attempt) {
    ns = ringlet::core::cpu_round_trip_ns(cpus[0], cpus[1], 100);
  }
  // A time slice (a busy machine) at most per batch of 4 trips: well under 10 ms a trip.
  CHECK(ns > 1);
  CHECK(ns < 1e7);
}
