// Where a rank's bytes move: within its share of a core's cache, past it at the host's memory's
// share, a shm message's copies within and past the cache, the window's writes and reads of lines
// another core holds, and reductions in place and out of place. The simulated network's clock and
// the algorithms' schedules: test_simulation.cpp.
#include <doctest/doctest.h>

#include <cstddef>

#include "collectives/fingerprint.h"
#include "core/deadline.h"
#include "model/network.h"
#include "model/simulate.h"
#include "simulated_links.h"

using namespace ringlet;
using collectives::Algorithm;

using testing::messages;
using testing::simulated;
using testing::test_profile;

TEST_CASE("past the cache, a host's cores share its memory's bandwidth") {
  model::Profile p = test_profile();
  p.cores_per_host = 2;
  p.cache_bytes = 12 << 20;
  p.memory_GBps = 6;  // all cores together
  model::VirtualNetwork net({4, 4}, p);
  // 4 ranks touching 3 x 1 MiB each (input, output, what they receive) fit the cache: a core's
  // own rate.
  net.set_buffer_bytes(1 << 20);
  CHECK(net.moving_GBps(0, 10) == 10);
  // 4 x 3 x 4 MiB: three quarters of the bytes miss the cache and move at a core's share of the
  // memory (6 GB/s / 2 busy cores); a link's copy at one end touches memory once, not twice.
  net.set_buffer_bytes(4 << 20);
  CHECK(net.moving_GBps(0, 10) == doctest::Approx(1 / (0.25 / 10 + 0.75 / 3)));
  CHECK(net.moving_GBps(0, 10, 1) == doctest::Approx(1 / (0.25 / 10 + 0.75 / 6)));
  CHECK(net.moving_GBps(0, 2) == 2);  // a core slower than its share
  // A last level of 24 MiB, past which all cores copy 2 GB/s slice by slice: 4 x 3 x 4 MiB
  // touched, half of it past that level, at a core's share of it (1 GB/s) on top.
  p.last_level_bytes = 24 << 20;
  p.past_last_level_GBps = 2;
  model::VirtualNetwork past_level({4, 4}, p);
  past_level.set_buffer_bytes(4 << 20);
  const double within = 1 / (0.25 / 10 + 0.75 / 3);
  CHECK(past_level.moving_GBps(0, 10) == doctest::Approx(1 / (0.5 / within + 0.5 / 1)));
  past_level.set_buffer_bytes(1 << 20);  // 12 MiB: within both
  CHECK(past_level.moving_GBps(0, 10) == 10);
  // Without the figures, no limit.
  model::VirtualNetwork unlimited({4, 4}, test_profile());
  unlimited.set_buffer_bytes(std::size_t{1} << 30);
  CHECK(unlimited.moving_GBps(0, 10) == 10);
}

TEST_CASE("within its share of a core's cache, a rank moves its own bytes at the cached rate") {
  model::Profile p = test_profile();
  p.cores_per_host = 2;
  p.core_cache_bytes = 3 << 20;  // 4 ranks on 2 cores: 1.5 MiB each
  model::VirtualNetwork net({4, 4}, p);
  net.set_buffer_bytes(256 << 10);  // touching 3 x 256 KiB (input, output, what it receives)
  CHECK(net.moving_GBps(0, 10, 1, 40) == 40);
  CHECK(net.moving_GBps(0, 10) == 10);  // no cached rate named: the core's
  // What a 1 MiB buffer touches is twice the rank's share: a sweep of it keeps none in the
  // cache, not half.
  net.set_buffer_bytes(1 << 20);
  CHECK(net.moving_GBps(0, 10, 1, 40) == 10);
  net.set_buffer_bytes(512 << 10);  // exactly the share: all of it held
  CHECK(net.moving_GBps(0, 10, 1, 40) == 40);
  model::Profile none = p;
  none.core_cache_bytes = 0;
  model::VirtualNetwork uncached({4, 4}, none);
  uncached.set_buffer_bytes(256 << 10);
  CHECK(uncached.moving_GBps(0, 10, 1, 40) == 10);
}

TEST_CASE("over shm within the cache, a message each way at once takes as long as one") {
  // Two cores: each message's copies hold both, at the rate a core reads what another wrote
  // (twice the link's here), so the two directions share the cores in the wire's time.
  model::Profile p = test_profile();
  p.intra.copies = true;
  p.cores_per_host = 2;
  p.core_cache_bytes = 1 << 20;
  p.shared_read_GBps = 8;
  const std::size_t bytes = 256 << 10;
  const auto exchange = [&](const model::Profile& profile) {
    model::VirtualNetwork net({2, 2}, profile);
    net.set_buffer_bytes(bytes);
    return net.run([&](int rank) {
      const auto forever = core::Deadline::never();
      auto recv = net.recv(rank, 1 - rank, bytes);
      net.send(rank, 1 - rank, bytes)->wait(forever);
      recv->wait(forever);
    });
  };
  const double one = 2e-6 + bytes / 4e9;
  CHECK(exchange(p) == doctest::Approx(one).epsilon(1e-9));
  // The cores at the link's rate: one direction after the other, and between them the first
  // message's receiving half of the latency (work of a core, as the sending half before both).
  model::Profile past = p;
  past.shared_read_GBps = 0;
  CHECK(exchange(past) == doctest::Approx(one + bytes / 4e9 + 1e-6).epsilon(1e-9));
}

TEST_CASE("over shm, a message sent whole is copied in, then out: each way at once, no longer") {
  // Up to in_place_bytes the link sends a message whole: the sender's core copies it in, then a
  // core of the receiver's host copies it out, each half its time on the link within the cache
  // and all of it past the cache; the latency's halves are the two ends' work.
  model::Profile p = test_profile();
  p.intra.copies = true;
  p.intra.in_place_bytes = 1 << 20;
  p.cores_per_host = 2;
  p.cache_bytes = 8 << 20;  // 2 ranks x 3 x 256 KiB fit
  const std::size_t bytes = 256 << 10;
  const double line = bytes / 4e9;
  CHECK(messages(p, bytes, bytes, false) == doctest::Approx(2e-6 + line).epsilon(1e-9));
  CHECK(messages(p, bytes, bytes, true) == doctest::Approx(2e-6 + line).epsilon(1e-9));
  // Half of what the ranks touch misses the cache: each copy three quarters of the line.
  CHECK(messages(p, bytes, (8 << 20) / 3, true) ==
        doctest::Approx(2e-6 + 1.5 * line).epsilon(1e-6));
  // One core whose own cache holds what both ranks touch: it does all four copies of an
  // exchange, one after another.
  p.cores_per_host = 1;
  p.core_cache_bytes = 2 << 20;
  CHECK(messages(p, bytes, bytes, true) == doctest::Approx(2 * (2e-6 + line)).epsilon(1e-9));
  // Its share of that core's cache smaller than the 768 KiB it touches: the cache two ranks'
  // exchanges find still holds what a step touches (3 x 256 KiB), each copy half the line.
  p.core_cache_bytes = 1 << 20;
  CHECK(messages(p, bytes, bytes, true) == doctest::Approx(2 * (2e-6 + line)).epsilon(1e-9));
  // That cache a third of it: two thirds missed, each copy five sixths of the line.
  p.cache_bytes = bytes;
  CHECK(messages(p, bytes, bytes, true) ==
        doctest::Approx(2 * (2e-6 + line * (1.0 / 3 + 2 * 2.0 / 3))).epsilon(1e-9));
  // Without that cache, its share of the core's: each copy the whole line.
  p.cache_bytes = 0;
  CHECK(messages(p, bytes, bytes, true) == doctest::Approx(2 * (2e-6 + 2 * line)).epsilon(1e-9));
  p.cache_bytes = 8 << 20;
  // A message its receiver's own thread reads (up to waiter_bytes): its copies within the last
  // level, which holds what both ranks touch, as for ranks with a core each.
  p.intra.waiter_bytes = bytes;
  CHECK(messages(p, bytes, bytes, true) == doctest::Approx(2 * (2e-6 + line)).epsilon(1e-9));
  p.intra.waiter_bytes = 0;
  // Larger than the link sends whole: a core at each end at once, for the line.
  p.cores_per_host = 2;
  CHECK(messages(p, 2 << 20, 2 << 20, false) ==
        doctest::Approx(2e-6 + (2 << 20) / 4e9).epsilon(1e-9));
}

TEST_CASE("the window's writes for its peers and reads of theirs cost the shared rates") {
  model::Profile p = test_profile();
  p.intra.copies = true;
  const std::size_t bytes = 1 << 20;
  const auto window = [&](const model::Profile& profile) {
    return model::simulate({model::Collective::all_reduce, Algorithm::window, {2, 0}, bytes},
                           profile)
        .seconds;
  };
  const double base = window(p);
  // Each rank writes the whole buffer into its window (its peer's half staged, its own half
  // reduced): at 8 GB/s instead of the copy's 16.
  model::Profile slow_writes = p;
  slow_writes.shared_write_GBps = 8;
  CHECK(window(slow_writes) - base == doctest::Approx(bytes / 8e9 - bytes / 16e9).epsilon(1e-6));
  // It gathers half the buffer out of its peer's window at 32 GB/s instead of 16; its
  // reduction out of that window stays at the reduction's 8.
  model::Profile fast_reads = p;
  fast_reads.shared_read_GBps = 32;
  CHECK(base - window(fast_reads) ==
        doctest::Approx(bytes / 2 / 16e9 - bytes / 2 / 32e9).epsilon(1e-6));
}

TEST_CASE("the window's writes past a core's cache share: at the rate past it") {
  model::Profile p = test_profile();
  p.intra.copies = true;
  p.shared_write_GBps = 8;
  p.core_cache_bytes = 768 << 10;  // a core per rank: each rank's share
  const std::size_t bytes = 1 << 20;
  const auto window = [&](const model::Profile& profile) {
    return model::simulate({model::Collective::all_reduce, Algorithm::window, {2, 0}, bytes},
                           profile)
        .seconds;
  };
  model::Profile past = p;
  past.shared_write_past_GBps = 32;
  // Each rank writes the whole buffer into its window: the 3 MiB it touches do not fit its share
  // of a core's cache (768 KiB), so none of it stays there: all at 32 GB/s instead of 8.
  CHECK(window(p) - window(past) == doctest::Approx(bytes / 8e9 - bytes / 32e9).epsilon(1e-6));
  // Within the share, nothing changes.
  past.core_cache_bytes = p.core_cache_bytes = 4 << 20;
  CHECK(window(past) == doctest::Approx(window(p)).epsilon(1e-12));
}

TEST_CASE("the ring past the cache: slower by its memory, the same within it") {
  model::Profile p = model::default_profile();
  p.cache_bytes = 32 << 20;  // the memory behind it: no limit (0), or 2 GB/s
  const auto ring = [](const model::Profile& profile, std::size_t bytes) {
    return model::simulate({model::Collective::all_reduce, Algorithm::ring, {4, 0}, bytes}, profile)
        .seconds;
  };
  model::Profile limited = p;
  limited.memory_GBps = 2;
  CHECK(ring(limited, 1 << 20) == ring(p, 1 << 20));
  CHECK(ring(limited, 64 << 20) > 1.2 * ring(p, 64 << 20));
}

// Out of place, a reduction that first meets the input reads it there and writes the output,
// whose lines it fetches first: past the cache, three streams of memory where in place it has two.
// Recursive doubling over 2 ranks reduces once; within the cache, the two are the same.
TEST_CASE("an out-of-place all-reduce: its reductions out of the input read one stream more") {
  model::Profile p = test_profile();
  p.cores_per_host = 2;
  p.cache_bytes = 6 << 20;
  p.memory_GBps = 6;
  const std::size_t bytes = 4 << 20;
  const auto rd = [&](std::size_t size, bool in_place) {
    model::SimCase c{model::Collective::all_reduce, Algorithm::recursive_doubling, {2, 0}, size};
    c.in_place = in_place;
    return model::simulate(c, p).seconds;
  };
  model::VirtualNetwork net({2, 0}, p);
  net.set_buffer_bytes(bytes);
  const double two = net.moving_GBps(0, p.reduce_GBps, 2),
               three = net.moving_GBps(0, p.reduce_GBps, 3);
  REQUIRE(three < two);
  CHECK(rd(bytes, false) - rd(bytes, true) ==
        doctest::Approx(bytes / (three * 1e9) - bytes / (two * 1e9)).epsilon(1e-9));
  CHECK(rd(64 << 10, false) == rd(64 << 10, true));
  // The ring: every reduce-scatter step reads this rank's own chunk out of the input.
  model::SimCase ring{model::Collective::all_reduce, Algorithm::ring, {4, 0}, bytes};
  const double in_place = model::simulate(ring, p).seconds;
  ring.in_place = false;
  CHECK(model::simulate(ring, p).seconds > in_place);
}

// The ring's reductions in place take a slice the core holds (what it just received) into the
// rank's own buffer, which only its core touches: at reduce_in_place_GBps, and past the cache the
// ranks' copies find but within the last level at that rate still (the memory's share bounds
// other bytes there); past the last level, the share bounds it too. Out of place, every one of
// the ring's reductions reads the input apart: at reduce_GBps, as without the figure.
TEST_CASE("a reduction in place of a slice it holds: its own rate, bounded past the last level") {
  model::Profile p = test_profile();
  p.reduce_in_place_GBps = 32;
  for (const int n : {2, 3, 4, 7}) {
    CAPTURE(n);
    const std::size_t chunk = 4096 * 4;
    const double fingerprint = sizeof(collectives::Fingerprint) / (p.intra.bandwidth_GBps * 1e9);
    const double expected =
        fingerprint + (n - 1) * (2 * p.intra.latency_us * 1e-6 +
                                 2 * chunk / (p.intra.bandwidth_GBps * 1e9) + chunk / (32e9));
    CHECK(simulated(model::Collective::all_reduce, Algorithm::ring, n, 0, chunk * n, p) ==
          doctest::Approx(expected).epsilon(1e-9));
    model::SimCase apart{model::Collective::all_reduce, Algorithm::ring, {n, 0}, chunk * n};
    apart.in_place = false;
    CHECK(model::simulate(apart, p).seconds == model::simulate(apart, test_profile()).seconds);
  }
  p.cores_per_host = 2;
  p.cache_bytes = 6 << 20;
  p.memory_GBps = 6;
  p.last_level_bytes = 96 << 20;
  model::VirtualNetwork net({2, 0}, p);
  net.set_buffer_bytes(4 << 20);  // 2 ranks x 12 MiB: past the cache, within the last level
  CHECK(net.moving_GBps(0, 32, 2, 0, true) == 32);
  CHECK(net.moving_GBps(0, 32, 2) < 8);  // other bytes there: at most the memory's share
  net.set_buffer_bytes(32 << 20);        // 2 x 96 MiB: half of it past the last level
  const double share = 6.0 * 2 / 2 / 2;  // two streams, two busy cores
  CHECK(net.moving_GBps(0, 32, 2, 0, true) == doctest::Approx(1 / (0.5 / 32 + 0.5 / share)));
}
