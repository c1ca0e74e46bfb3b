// What a message costs on each kind of link of the simulated network, against closed forms: times
// by size (tcp loopback's, shm's), links whose CPUs are the wire, copying links' cores, messages a
// link copies whole or its receiver uses where they lie, and which cache their copies find.
#include <doctest/doctest.h>

#include <cstddef>

#include "collectives/algorithm_choice.h"
#include "core/deadline.h"
#include "model/network.h"
#include "model/profile.h"
#include "model/simulate.h"
#include "simulated_links.h"

using namespace ringlet;
using collectives::Algorithm;
using testing::messages;
using testing::simulated;
using testing::test_profile;

TEST_CASE("a link with times by size: within the cache a message takes them, past it the line") {
  model::Profile p = test_profile();
  p.intra = {2.0, 1.0};  // the line: 2 us + bytes / 1 GB/s
  p.intra.by_size = {{1000, 3, 5}, {3000, 7, 13}};
  // Interpolated between the sizes around it, the smallest's below them, along the last two past
  // them.
  CHECK(messages(p, 2000, 2000, false) == doctest::Approx(5e-6).epsilon(1e-12));
  CHECK(messages(p, 500, 500, false) == doctest::Approx(3e-6).epsilon(1e-12));
  CHECK(messages(p, 5000, 5000, false) == doctest::Approx(11e-6).epsilon(1e-12));
  // 2 ranks touching 3 x 4000 bytes each; a cache of 6000 holds a quarter of it: a quarter of the
  // message at its time by size (3 us beyond the latency), the rest at the line's rate (2 us).
  p.cache_bytes = 6000;
  CHECK(messages(p, 2000, 4000, false) ==
        doctest::Approx(2e-6 + 0.25 * 3e-6 + 0.75 * 2e-6).epsilon(1e-12));
  CHECK(messages(p, 2000, 1000, false) == doctest::Approx(5e-6).epsilon(1e-12));  // it fits
}

// A copying link's cores are busy for what an exchange takes beyond one way: where that is no
// longer than the wire, one way and an exchange take the times they were measured at (between
// two hosts of a core each, where the latency is a delay).
TEST_CASE("a copying link with times by size: one way and an exchange take theirs") {
  model::Profile p = test_profile();
  p.cores_per_host = 1;
  p.inter = {2.0, 1.0, true, 1.0};
  p.inter.by_size = {{1000, 3, 5}, {3000, 9, 13}};  // at 2000 bytes: 6 us one way, 9 exchanged
  CHECK(messages(p, 2000, 2000, false, 1) == doctest::Approx(6e-6).epsilon(1e-12));
  CHECK(messages(p, 2000, 2000, true, 1) == doctest::Approx(9e-6).epsilon(1e-12));
}

// Within a host, tcp's CPUs are its wire: a message's time by size is work on the cores, the
// sender's moving it out, then the receiver's moving it in, each half of what an exchange takes
// beyond the latency (here (9 - 2) / 2 us at 2000 bytes).
TEST_CASE("where the CPUs are the wire, the sender's core moves a message out, the receiver's in") {
  model::Profile p = test_profile();
  p.intra = {2.0, 1.0, true, 1.0};
  p.intra.by_size = {{1000, 3, 5}, {3000, 9, 13}};  // at 2000 bytes: 6 us one way, 9 exchanged
  p.cores_per_host = 2;
  // A core each: one way and an exchange take what they were measured at.
  CHECK(messages(p, 2000, 2000, false, 2) == doctest::Approx(6e-6).epsilon(1e-12));
  CHECK(messages(p, 2000, 2000, true, 2) == doctest::Approx(9e-6).epsilon(1e-12));
  {  // a third rank computing on the receiver's core first: the receiver's part waits for it
    model::VirtualNetwork net({3, 3}, p);
    const double t = net.run([&](int rank) {
      if (rank == 1) net.send(1, 0, 2000)->wait(core::Deadline::never());
      if (rank == 0) net.recv(0, 1, 2000)->wait(core::Deadline::never());
      if (rank == 2) net.spend(2, 0.5e-3);
    });
    CHECK(t == doctest::Approx(0.5e-3 + 3.5e-6 + 1e-6).epsilon(1e-12));
  }
  // The kernel's copies of a message stay in the last level: what the ranks touch may outgrow
  // the cache and the message still takes its times by size (2 ranks x 3 x 4000 bytes)...
  p.cache_bytes = 6000;
  p.last_level_bytes = 24000;
  CHECK(messages(p, 2000, 4000, false, 2) == doctest::Approx(6e-6).epsilon(1e-12));
  // ... past the last level, that share moves at the line's and the CPUs' rates: touching
  // 48000 bytes, half of it. The link's time, half of 4 us and half of 2000 bytes at 1 GB/s, is
  // longer than each end's work (half of 3.5 us, half of 2000 bytes at 1 GB/s): the receiver's
  // ends that much after the sender's began (and the latency, half at each end).
  const double wire = 0.5 * 4e-6 + 0.5 * 2e-6;
  CHECK(messages(p, 2000, 8000, false, 2) == doctest::Approx(2e-6 + wire).epsilon(1e-12));
  // One core for both ranks: all of both ends' work one after the other, an exchange's worth.
  p.cache_bytes = p.last_level_bytes = 0;
  p.cores_per_host = 1;
  CHECK(messages(p, 2000, 2000, false, 2) == doctest::Approx(9e-6).epsilon(1e-12));
}

// Over a link whose receiver uses a message where it lies (shm), recursive doubling's message is
// the sender's copy into the link (half the link's time per byte), the latency (half on each
// end's core), and the receiver's reduction out of the link at the rate it reads a peer's lines;
// no copy out.
TEST_CASE("a fingerprinted message used where it lies: the sender's copy, then the reduction") {
  model::Profile p = test_profile();
  p.intra.copies = true;
  p.intra.in_place_bytes = 1 << 20;
  p.shared_read_GBps = 2;  // slower than the reduction's 8: the reduction reads at 2
  const double head = 24, bytes = 1 << 16;
  const double expected = head / (p.copy_GBps * 1e9) + 1e-6 +
                          (head + bytes) / (2 * p.intra.bandwidth_GBps * 1e9) + 1e-6 + bytes / 2e9;
  CHECK(simulated(model::Collective::all_reduce, Algorithm::recursive_doubling, 2, 0, 1 << 16, p) ==
        doctest::Approx(expected).epsilon(1e-9));
  // A message longer than the link takes so, or none taken so: copied out, as any other.
  model::Profile copied = p;
  copied.intra.in_place_bytes = 0;
  const double without = simulated(model::Collective::all_reduce, Algorithm::recursive_doubling, 2,
                                   0, 1 << 16, copied);
  CHECK(without > expected);
  p.intra.in_place_bytes = 1 << 15;
  CHECK(simulated(model::Collective::all_reduce, Algorithm::recursive_doubling, 2, 0, 1 << 16, p) ==
        doctest::Approx(without).epsilon(1e-12));
}

// An exchange whose own send was queued takes the peer's message the usual way (as
// ChannelContext::swap_fingerprinted does): the link's second copy, out of it, is the receiver's.
TEST_CASE("a message sent in place and received the usual way is copied out on the receiver") {
  model::Profile p = test_profile();
  p.intra.copies = true;
  p.intra.in_place_bytes = 1 << 20;
  const std::size_t bytes = 1 << 16;
  const auto run = [&](bool in_place) {
    model::VirtualNetwork net({2, 0}, p);
    net.set_buffer_bytes(bytes);
    return net.run([&](int rank) {
      if (rank == 0) net.send_joined(0, 1, bytes)->wait(core::Deadline::never());
      if (rank == 1 && in_place) {
        net.take_in_place(1, 0, bytes, core::Deadline::never(), [](std::size_t) {});
      }
      if (rank == 1 && !in_place) net.recv(1, 0, bytes)->wait(core::Deadline::never());
    });
  };
  const double copy = bytes / (2 * p.intra.bandwidth_GBps * 1e9);
  // The sender's half of the latency and its copy in, then the receiver's half.
  CHECK(run(true) == doctest::Approx(1e-6 + copy + 1e-6).epsilon(1e-12));
  CHECK(run(false) == doctest::Approx(1e-6 + copy + 1e-6 + copy).epsilon(1e-12));
}

// A message copied in by the sender and out by the receiver's own thread (up to waiter_bytes)
// passes through the last level: its copies take half the link's time each while what the ranks
// touch fits there, whatever the cache two ranks' exchanges find. A longer one, copied out by a
// connection's thread, moves at the link's rate in the share that misses that cache.
TEST_CASE("a message the receiver's own thread copies out stays in the last level") {
  model::Profile p = test_profile();
  p.intra.copies = true;
  p.intra.in_place_bytes = 1 << 20;
  p.intra.waiter_bytes = 1 << 16;
  p.cache_bytes = 1 << 16;
  p.last_level_bytes = 1 << 24;
  const std::size_t buffer = 1 << 20;  // 2 ranks x 3 x 1 MiB: past the cache, within the level
  const auto line = [&](double bytes) { return bytes / (p.intra.bandwidth_GBps * 1e9); };
  CHECK(messages(p, 1 << 15, buffer, false) ==
        doctest::Approx(2e-6 + 2 * line(1 << 15) / 2).epsilon(1e-12));
  const double missed = 1 - 65536.0 / (6 * buffer);
  CHECK(messages(p, 1 << 17, buffer, false) ==
        doctest::Approx(2e-6 + 2 * ((1 - missed) * line(1 << 17) / 2 + missed * line(1 << 17)))
            .epsilon(1e-12));
}

// A link that copies messages whole, with times by size (shm, fitted): within the cache each copy
// is half of what an exchange of its size takes beyond the latency, at the sizes from 64 KiB up to
// what the receiver's own thread copies out; outside them, at the nearest such size's rate.
TEST_CASE("a message copied whole with times by size: each copy half an exchange's work") {
  model::Profile p = test_profile();
  p.intra.copies = true;
  p.intra.in_place_bytes = 1 << 20;
  p.intra.by_size = {{4096, 3, 4}, {65536, 10, 14}, {131072, 18, 30}};
  p.cache_bytes = 1 << 30;  // all within it
  // 96 KiB: an exchange of 22 us, 20 beyond the latency: 10 us a copy, two copies and the latency.
  CHECK(messages(p, 98304, 98304, false) == doctest::Approx(2e-6 + 2 * 10e-6).epsilon(1e-12));
  // 16 KiB: a quarter of 64 KiB's copy ((14 - 2) / 2 us), not along the line from 4 KiB.
  CHECK(messages(p, 16384, 16384, false) == doctest::Approx(2e-6 + 2 * 6e-6 / 4).epsilon(1e-12));
  // Where the receiver's own thread copies up to 64 KiB, 128 KiB at 64 KiB's rate, not its own.
  p.intra.waiter_bytes = 65536;
  CHECK(messages(p, 131072, 131072, false) == doctest::Approx(2e-6 + 2 * 12e-6).epsilon(1e-12));
}

// Past the last level a message's copies have the rank's side in memory and the link's in cache:
// half of each byte's copy at the link's rate, half at a core's share of what all cores copy past
// the level.
TEST_CASE("a message copied whole: past the last level, half its copies at memory's share") {
  model::Profile p = test_profile();
  p.intra.copies = true;
  p.intra.in_place_bytes = 1 << 20;
  p.past_last_level_GBps = 2;  // a core's share of it (2 ranks, a core each): 1 GB/s
  const std::size_t bytes = 1 << 16, buffer = 1 << 20;
  const double line = bytes / (p.intra.bandwidth_GBps * 1e9);  // no cache given: all of it a copy
  p.last_level_bytes = 6 * buffer;  // 2 ranks x 3 x the buffer: within the level
  CHECK(messages(p, bytes, buffer, false) == doctest::Approx(2e-6 + 2 * line).epsilon(1e-12));
  p.last_level_bytes = 3 * buffer;  // half of it past the level: half of the bytes stretch
  const double slowing = 0.5 + 0.5 * (0.5 + 0.5 * 4.0 / 1.0);
  CHECK(messages(p, bytes, buffer, false) ==
        doctest::Approx(2e-6 + 2 * line * slowing).epsilon(1e-12));
}
