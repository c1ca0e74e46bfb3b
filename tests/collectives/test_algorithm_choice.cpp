// collectives/algorithm_choice and options: which all-reduce algorithm runs, as a table of
// size x transport x world size (and explicit requests); the topology (ranks grouped by host)
// that decides whether the hierarchical all-reduce can run; and the settings resolved once from
// the environment.
#include <doctest/doctest.h>

#include <cstdlib>
#include <string>
#include <vector>

#include "collectives/algorithm_choice.h"
#include "collectives/options.h"
#include "collectives/topology.h"
#include "core/error.h"

using namespace ringlet::collectives;

namespace {

constexpr std::size_t KiB = 1024, MiB = 1024 * KiB;

// What the communicator agrees on for ranks connected by `transport`: "tcp" (nothing shared),
// "shm" (cross-memory reads and shared windows), "shm-nowin" (RINGLET_SHM_WINDOW_BYTES=0), or
// "shm-nocma" (RINGLET_SHM_CMA=0: neither), or "hosts" (several hosts with the same number, at
// least 2, of ranks on each: the hierarchical all-reduce can run). Device buffers: "ipc" (every
// rank opened every rank's device window; the host connections are shm), "staged" (no device
// windows: ranks on one host over tcp), "staged-hosts" (several hosts, no device windows),
// "flags" (ipc whose ranks synchronize through device flags, an 8 MiB staged area per window),
// "flags-64k" (the same with a 64 KiB area). A single rank reads its own memory, has no windows
// (a device-flags space of one rank still has its flags).
PeerAccess access_of(const std::string& transport, int world_size) {
  PeerAccess access;
  if (world_size == 1) {
    access.peers_readable = true;
    access.device_flags = transport.rfind("flags", 0) == 0;
  } else if (transport == "shm") {
    access.peers_readable = access.windows = true;
  } else if (transport == "shm-nowin") {
    access.peers_readable = true;
  } else if (transport == "hosts" || transport == "staged-hosts") {
    access.hosts = true;
  } else if (transport == "ipc") {
    access.peers_readable = access.windows = access.device_windows = true;
  } else if (transport == "flags" || transport == "flags-64k") {
    access.peers_readable = access.windows = access.device_windows = access.device_flags = true;
    access.device_area_bytes = transport == "flags" ? 8 * MiB : 64 * KiB;
  }
  return access;
}

struct Row {
  const char* transport;
  int world_size;
  std::size_t bytes;
  AlgoRequest request;
  Algorithm expected;
  Buffers buffers = Buffers::host;
};

constexpr auto device = Buffers::device;

constexpr auto automatic = AlgoRequest::automatic;
constexpr auto ring = Algorithm::ring;
constexpr auto rd = Algorithm::recursive_doubling;
constexpr auto direct = Algorithm::direct;
constexpr auto window = Algorithm::window;
constexpr auto hierarchical = Algorithm::hierarchical;
constexpr auto one_shot = Algorithm::one_shot;
constexpr auto two_shot = Algorithm::two_shot;

const std::vector<Row> kTable = {
    // tcp: recursive doubling up to 64 KiB, the ring above, whatever the world size.
    {"tcp", 2, 4 * KiB, automatic, rd},
    {"tcp", 2, 64 * KiB, automatic, rd},
    {"tcp", 2, 64 * KiB + 4, automatic, ring},
    {"tcp", 2, 1 * MiB, automatic, ring},
    {"tcp", 2, 64 * MiB, automatic, ring},
    {"tcp", 3, 4 * KiB, automatic, rd},
    {"tcp", 4, 16 * MiB, automatic, ring},
    {"tcp", 8, 64 * KiB, automatic, rd},
    // shm with windows: rd below 64 KiB, windows from 64 KiB at every size above; two ranks
    // rd up to 256 KiB.
    {"shm", 2, 4 * KiB, automatic, rd},
    {"shm", 2, 256 * KiB, automatic, rd},
    {"shm", 2, 256 * KiB + 4, automatic, window},
    {"shm", 4, 32 * KiB, automatic, rd},
    {"shm", 8, 64 * KiB - 4, automatic, rd},
    {"shm", 4, 64 * KiB, automatic, window},
    {"shm", 4, 64 * KiB, automatic, window},
    {"shm", 4, 1 * MiB, automatic, window},
    {"shm", 3, 64 * MiB, automatic, window},
    // shm without windows: rd, the ring in between, cross-memory attach from 1 MiB.
    {"shm-nowin", 2, 64 * KiB, automatic, rd},
    {"shm-nowin", 2, 256 * KiB, automatic, ring},
    {"shm-nowin", 2, 1 * MiB, automatic, direct},
    {"shm-nowin", 4, 64 * MiB, automatic, direct},
    // shm whose ranks cannot read each other's memory: as tcp.
    {"shm-nocma", 2, 4 * KiB, automatic, rd},
    {"shm-nocma", 4, 16 * MiB, automatic, ring},
    // Several hosts, 2 ranks on each: rd for small messages, then the hierarchical all-reduce.
    {"hosts", 4, 4 * KiB, automatic, rd},
    {"hosts", 4, 64 * KiB, automatic, rd},
    {"hosts", 4, 64 * KiB + 4, automatic, hierarchical},
    {"hosts", 6, 1 * MiB, automatic, hierarchical},
    {"hosts", 4, 64 * MiB, automatic, hierarchical},
    // One rank: nothing to exchange; the choice only decides the local copy.
    {"tcp", 1, 4 * KiB, automatic, rd},
    {"shm", 1, 256 * KiB, automatic, ring},
    {"shm", 1, 16 * MiB, automatic, direct},
    // Explicit requests win where they can run, else the ring.
    {"tcp", 2, 4 * KiB, AlgoRequest::ring, ring},
    {"tcp", 4, 64 * MiB, AlgoRequest::recursive_doubling, rd},
    {"tcp", 5, 8, AlgoRequest::rabenseifner, Algorithm::rabenseifner},
    {"shm", 3, 64 * MiB, AlgoRequest::rabenseifner, Algorithm::rabenseifner},
    {"tcp", 7, 4 * KiB, AlgoRequest::tree, Algorithm::tree},
    {"tcp", 2, 64 * MiB, AlgoRequest::direct, ring},
    {"tcp", 2, 64 * MiB, AlgoRequest::window, ring},
    {"shm", 2, 4 * KiB, AlgoRequest::window, window},
    {"shm", 2, 4 * KiB, AlgoRequest::direct, direct},
    {"shm", 2, 64 * MiB, AlgoRequest::ring, ring},
    {"shm", 1, 4 * KiB, AlgoRequest::window, ring},
    {"hosts", 4, 4 * KiB, AlgoRequest::hierarchical, hierarchical},
    {"hosts", 4, 64 * MiB, AlgoRequest::ring, ring},
    {"tcp", 4, 64 * MiB, AlgoRequest::hierarchical, ring},
    // Device buffers: the device windows at every size where every rank opened them, else the
    // hierarchical all-reduce across hosts, else the ring (staged through the host).
    {"ipc", 2, 8, automatic, window, device},
    {"ipc", 4, 64 * MiB, automatic, window, device},
    {"staged", 2, 8, automatic, ring, device},
    {"staged", 4, 64 * MiB, automatic, ring, device},
    {"staged-hosts", 4, 8, automatic, hierarchical, device},
    {"staged-hosts", 4, 64 * MiB, automatic, hierarchical, device},
    {"ipc", 1, 4 * KiB, automatic, ring, device},
    // ... where explicit requests for device algorithms win where they can run, requests for
    // Rabenseifner's and the tree run them staged through the host (flags or not), and requests
    // for host-only ones (rd, direct) count as automatic.
    {"ipc", 2, 4 * KiB, AlgoRequest::ring, ring, device},
    {"ipc", 2, 4 * KiB, AlgoRequest::recursive_doubling, window, device},
    {"ipc", 2, 64 * MiB, AlgoRequest::direct, window, device},
    {"staged", 2, 4 * KiB, AlgoRequest::window, ring, device},
    {"staged", 2, 4 * KiB, AlgoRequest::recursive_doubling, ring, device},
    {"staged", 4, 4 * KiB, AlgoRequest::rabenseifner, Algorithm::rabenseifner, device},
    {"staged", 4, 4 * KiB, AlgoRequest::tree, Algorithm::tree, device},
    {"flags", 3, 4 * KiB, AlgoRequest::rabenseifner, Algorithm::rabenseifner, device},
    {"flags", 3, 64 * MiB, AlgoRequest::tree, Algorithm::tree, device},
    {"flags", 1, 4 * KiB, AlgoRequest::tree, ring, device},
    {"staged-hosts", 4, 4 * KiB, AlgoRequest::ring, ring, device},
    {"staged-hosts", 4, 4 * KiB, AlgoRequest::direct, hierarchical, device},
    // Device flags: one-shot up to 256 KiB (and what the staged area holds), two-shot above.
    {"flags", 2, 8, automatic, one_shot, device},
    {"flags", 4, 64 * KiB, automatic, one_shot, device},
    {"flags", 2, 256 * KiB, automatic, one_shot, device},
    {"flags", 2, 256 * KiB + 4, automatic, two_shot, device},
    {"flags", 4, 64 * MiB, automatic, two_shot, device},
    {"flags-64k", 2, 64 * KiB, automatic, one_shot, device},
    {"flags-64k", 2, 128 * KiB, automatic, two_shot, device},
    {"flags", 1, 4 * KiB, automatic, one_shot, device},  // one rank: a copy on the device
    {"flags", 1, 4 * KiB, AlgoRequest::ring, ring, device},
    // ... requests: one-shot where the area holds it, the window request is two-shot, ring and
    // hierarchical stay host-driven; one- and two-shot requests elsewhere count as automatic.
    {"flags", 2, 4 * MiB, AlgoRequest::one_shot, one_shot, device},
    {"flags", 2, 64 * MiB, AlgoRequest::one_shot, two_shot, device},
    {"flags", 2, 8, AlgoRequest::two_shot, two_shot, device},
    {"flags", 2, 8, AlgoRequest::window, two_shot, device},
    {"flags", 2, 8, AlgoRequest::ring, ring, device},
    {"flags", 4, 8, AlgoRequest::hierarchical, ring, device},
    {"flags", 2, 8, AlgoRequest::recursive_doubling, one_shot, device},
    {"ipc", 2, 8, AlgoRequest::one_shot, window, device},
    {"staged", 2, 8, AlgoRequest::two_shot, ring, device},
    {"shm", 2, 4 * KiB, AlgoRequest::one_shot, rd},
};

void set_env(const char* name, const char* value) {
  if (value == nullptr) {
    ::unsetenv(name);
  } else {
    ::setenv(name, value, 1);
  }
}

}  // namespace

TEST_CASE("all-reduce algorithm: size x transport x world size (default thresholds)") {
  for (const Row& row : kTable) {
    CAPTURE(row.transport);
    CAPTURE(row.world_size);
    CAPTURE(row.bytes);
    CAPTURE(static_cast<int>(row.request));
    CAPTURE(row.buffers == device);
    const Algorithm got = choose_all_reduce(row.request, default_thresholds(),
                                            access_of(row.transport, row.world_size),
                                            row.world_size, row.bytes, row.buffers);
    CHECK(std::string(algorithm_name(got)) == algorithm_name(row.expected));
  }
}

TEST_CASE("all-reduce algorithm: thresholds move the switch points") {
  AlgoThresholds t = default_thresholds();
  t.rd_max_bytes = 1 * KiB;
  t.window_min_bytes = 1 * MiB;
  t.direct_min_bytes = 4 * KiB;
  CHECK(choose_all_reduce(automatic, t, {false, false, false}, 2, 2 * KiB) == ring);
  CHECK(choose_all_reduce(automatic, t, {true, true, false}, 2, 512 * KiB) == direct);
  CHECK(choose_all_reduce(automatic, t, {true, true, false}, 2, 1 * MiB) == window);
  CHECK(choose_all_reduce(automatic, t, {false, false, true}, 4, 2 * KiB) == hierarchical);
  // Two ranks with windows: recursive doubling up to its own limit, before the windows.
  t.pair_rd_max_bytes = 2 * MiB;
  CHECK(choose_all_reduce(automatic, t, {true, true, false}, 2, 1 * MiB) == rd);
  CHECK(choose_all_reduce(automatic, t, {true, true, false}, 3, 1 * MiB) == window);
  CHECK(choose_all_reduce(automatic, t, {true, false, false}, 2, 1 * MiB) == direct);  // none
  t.pair_rd_max_bytes = 0;
  CHECK(choose_all_reduce(automatic, t, {true, true, false}, 2, 1 * MiB) == window);
  // Thresholds set by hand decide alone, at two ranks too.
  CommOptions by_hand;
  by_hand.window_min_bytes = 64 * KiB;
  CHECK(resolve_options(by_hand, 2).thresholds.pair_rd_max_bytes == 0);
  CHECK(resolve_options(CommOptions{}, 2).thresholds.pair_rd_max_bytes == 256 * KiB);
}

TEST_CASE("algorithm requests parse by name; a bad one names the source and the choices") {
  CHECK(parse_algo_request("auto", "X") == AlgoRequest::automatic);
  CHECK(parse_algo_request("rd", "X") == AlgoRequest::recursive_doubling);
  CHECK(parse_algo_request("rabenseifner", "X") == AlgoRequest::rabenseifner);
  CHECK(parse_algo_request("tree", "X") == AlgoRequest::tree);
  CHECK(std::string(algorithm_name(Algorithm::tree)) == "tree");
  CHECK(std::string(algorithm_name(Algorithm::rabenseifner)) == "rabenseifner");
  CHECK(parse_algo_request("window", "X") == AlgoRequest::window);
  CHECK(parse_algo_request("hierarchical", "X") == AlgoRequest::hierarchical);
  CHECK(parse_algo_request("one_shot", "X") == AlgoRequest::one_shot);
  CHECK(parse_algo_request("two_shot", "X") == AlgoRequest::two_shot);
  CHECK(std::string(algorithm_name(Algorithm::hierarchical)) == "hierarchical");
  CHECK(std::string(algorithm_name(Algorithm::two_shot)) == "two_shot");
  CHECK(parse_algo_request("bruck", "X") == AlgoRequest::bruck);
  CHECK(std::string(algorithm_name(Algorithm::bruck)) == "bruck");
  CHECK_THROWS_WITH_AS(parse_algo_request("star", "RINGLET_ALGO"),
                       doctest::Contains("RINGLET_ALGO='star' is not one of auto, ring, rd, "
                                         "rabenseifner, tree, direct, window, hierarchical, "
                                         "one_shot, two_shot, bruck"),
                       ringlet::core::ValueError);
}

TEST_CASE("all-gather and reduce-scatter: Bruck's or halving / doubling where asked for") {
  using enum AlgoRequest;
  CHECK(choose_all_gather(rabenseifner, 3, Buffers::host) == Algorithm::doubling);
  CHECK(choose_all_gather(rabenseifner, 3, Buffers::device) == Algorithm::doubling);  // staged
  CHECK(choose_reduce_scatter(rabenseifner, 6, Buffers::host) == Algorithm::halving);
  CHECK(choose_reduce_scatter(rabenseifner, 1, Buffers::host) == Algorithm::ring);
  CHECK(choose_reduce_scatter(rabenseifner, 6, Buffers::device) == Algorithm::halving);
  for (AlgoRequest other : {automatic, ring, bruck, tree, window}) {
    CHECK(choose_reduce_scatter(other, 4, Buffers::host) == Algorithm::ring);
  }
  CHECK(std::string(algorithm_name(Algorithm::halving)) == "halving");
  CHECK(std::string(algorithm_name(Algorithm::doubling)) == "doubling");
  CHECK(choose_all_gather(bruck, 3, Buffers::host) == Algorithm::bruck);
  CHECK(choose_all_gather(bruck, 2, Buffers::host) == Algorithm::bruck);
  CHECK(choose_all_gather(bruck, 1, Buffers::host) == Algorithm::ring);  // one rank copies
  CHECK(choose_all_gather(bruck, 4, Buffers::device) == Algorithm::bruck);
  CHECK(choose_all_gather(bruck, 1, Buffers::device) == Algorithm::ring);
  for (AlgoRequest other : {automatic, ring, recursive_doubling, tree, window}) {
    CHECK(choose_all_gather(other, 4, Buffers::host) == Algorithm::ring);
  }
  // Bruck's is no all-reduce: asked for one, the all-reduce chooses as if asked for nothing.
  const AlgoThresholds t = default_thresholds();
  for (std::size_t bytes : {std::size_t{8}, 64 * MiB}) {
    CHECK(choose_all_reduce(bruck, t, {}, 4, bytes) ==
          choose_all_reduce(automatic, t, {}, 4, bytes));
    CHECK(choose_all_reduce(bruck, t, {}, 4, bytes, Buffers::device) ==
          choose_all_reduce(automatic, t, {}, 4, bytes, Buffers::device));
  }
}

TEST_CASE("topology: ranks grouped by host, hosts in order of their first rank") {
  SUBCASE("2 hosts x 2 ranks, each host's ranks consecutive") {
    const Topology t({"a", "a", "b", "b"});
    CHECK(t.hosts() == 2);
    CHECK(t.regular());
    CHECK(t.local_ranks(3) == std::vector<int>{2, 3});
    CHECK(t.local_index(3) == 1);
    CHECK(t.cross_ranks(0) == std::vector<int>{0, 2});
    CHECK(t.cross_ranks(3) == std::vector<int>{1, 3});
    CHECK(t.describe() == "2 hosts x 2 rank(s)");
  }
  SUBCASE("3 hosts x 2 ranks, interleaved: the second host is the one rank 1 is on") {
    const Topology t({"x", "y", "z", "x", "y", "z"});
    CHECK(t.regular());
    CHECK(t.local_ranks(4) == std::vector<int>{1, 4});
    CHECK(t.local_index(4) == 1);
    CHECK(t.cross_ranks(4) == std::vector<int>{3, 4, 5});
    CHECK(t.cross_ranks(2) == std::vector<int>{0, 1, 2});
  }
  SUBCASE("not regular: one host, one rank per host, or uneven hosts") {
    CHECK_FALSE(Topology({"a", "a", "a"}).regular());
    CHECK(Topology({"a", "a", "a"}).describe() == "1 host x 3 rank(s)");
    CHECK_FALSE(Topology({"a", "b", "c"}).regular());
    const Topology uneven({"a", "a", "b", "c"});
    CHECK_FALSE(uneven.regular());
    CHECK(uneven.describe() == "3 hosts: 2+1+1 ranks");
    CHECK_THROWS_WITH_AS(uneven.cross_ranks(0), doctest::Contains("3 hosts: 2+1+1 ranks"),
                         ringlet::core::ValueError);
    CHECK(uneven.local_ranks(1) == std::vector<int>{0, 1});
  }
}

TEST_CASE("options: the environment fills what the caller left unset, once") {
  set_env("RINGLET_ALGO", nullptr);
  set_env("RINGLET_SHM_WINDOW_BYTES", nullptr);
  set_env("RINGLET_CHANNELS", nullptr);
  set_env("RINGLET_INLINE_BYTES", nullptr);
  set_env("RINGLET_HIER_PIECE_BYTES", nullptr);
  set_env("RINGLET_TIMEOUT", nullptr);
  const ResolvedOptions defaults = resolve_options(CommOptions{}, 4);
  CHECK(defaults.algo == AlgoRequest::automatic);
  CHECK(defaults.window_bytes == 4 * 2 * 256 * KiB);
  CHECK(defaults.channels == 1);
  CHECK(defaults.inline_bytes == 64 * KiB);
  CHECK(defaults.piece_bytes == 4 * 1024 * KiB);
  CHECK(defaults.timeout == std::chrono::minutes(10));

  set_env("RINGLET_ALGO", "ring");
  set_env("RINGLET_CHANNELS", "3");
  CHECK(resolve_options(CommOptions{}, 2).algo == AlgoRequest::ring);
  CHECK(resolve_options(CommOptions{}, 2).channels == 3);
  CommOptions given;
  given.algo = "rd";
  given.channels = 2;
  CHECK(resolve_options(given, 2).algo == AlgoRequest::recursive_doubling);  // the caller wins
  CHECK(resolve_options(given, 2).channels == 2);

  set_env("RINGLET_ALGO", "fast");
  CHECK_THROWS_WITH_AS(
      resolve_options(CommOptions{}, 2),
      doctest::Contains("RINGLET_ALGO='fast' is not one of auto, ring, rd, rabenseifner, tree, "
                        "direct, window, hierarchical"),
      ringlet::core::ValueError);
  set_env("RINGLET_ALGO", nullptr);
  set_env("RINGLET_SHM_WINDOW_BYTES", "100");
  CHECK_THROWS_AS(resolve_options(CommOptions{}, 2), ringlet::core::ValueError);
  set_env("RINGLET_SHM_WINDOW_BYTES", nullptr);
  set_env("RINGLET_CHANNELS", nullptr);
  set_env("RINGLET_HIER_PIECE_BYTES", "0");  // one piece
  CHECK(resolve_options(CommOptions{}, 2).piece_bytes == 0);
  set_env("RINGLET_HIER_PIECE_BYTES", "-1");
  CHECK_THROWS_WITH_AS(resolve_options(CommOptions{}, 2),
                       doctest::Contains("RINGLET_HIER_PIECE_BYTES"), ringlet::core::ValueError);
  set_env("RINGLET_HIER_PIECE_BYTES", nullptr);
}

TEST_CASE("a model's table replaces the thresholds of auto on host buffers, and only there") {
  AlgoThresholds t = default_thresholds();
  t.table = {{8 * KiB, Algorithm::recursive_doubling},
             {MiB, Algorithm::rabenseifner},
             {0, Algorithm::ring}};
  const PeerAccess shm = access_of("shm", 4);
  CHECK(choose_all_reduce(AlgoRequest::automatic, t, shm, 4, 64) == Algorithm::recursive_doubling);
  CHECK(choose_all_reduce(AlgoRequest::automatic, t, shm, 4, 8 * KiB) ==
        Algorithm::recursive_doubling);
  CHECK(choose_all_reduce(AlgoRequest::automatic, t, shm, 4, 8 * KiB + 1) ==
        Algorithm::rabenseifner);
  CHECK(choose_all_reduce(AlgoRequest::automatic, t, shm, 4, 64 * MiB) == Algorithm::ring);
  // An explicit request wins; device buffers and a single rank keep their own choice.
  CHECK(choose_all_reduce(AlgoRequest::tree, t, shm, 4, 64) == Algorithm::tree);
  CHECK(choose_all_reduce(AlgoRequest::window, t, shm, 4, 64) == Algorithm::window);
  CHECK(choose_all_reduce(AlgoRequest::automatic, t, access_of("ipc", 4), 4, 64 * MiB,
                          Buffers::device) == Algorithm::window);
  CHECK(
      choose_all_reduce(AlgoRequest::automatic, t, access_of("shm", 1), 1, 64) ==
      choose_all_reduce(AlgoRequest::automatic, default_thresholds(), access_of("shm", 1), 1, 64));
  // Without an upper end on the last row, the last row still answers above every row.
  t.table = {{KiB, Algorithm::tree}, {MiB, Algorithm::ring}};
  CHECK(choose_all_reduce(AlgoRequest::automatic, t, shm, 4, 2 * MiB) == Algorithm::ring);
}

TEST_CASE("a table's window and direct rows run where the ranks can, else the thresholds decide") {
  AlgoThresholds t = default_thresholds();
  t.table = {
      {16 * KiB, Algorithm::recursive_doubling}, {MiB, Algorithm::window}, {0, Algorithm::direct}};
  CHECK(choose_all_reduce(AlgoRequest::automatic, t, access_of("shm", 4), 4, 64 * KiB) ==
        Algorithm::window);
  CHECK(choose_all_reduce(AlgoRequest::automatic, t, access_of("shm", 4), 4, 4 * MiB) ==
        Algorithm::direct);
  // No windows: the thresholds' choice at that size (above rd's, below direct's: the ring).
  CHECK(choose_all_reduce(AlgoRequest::automatic, t, access_of("shm-nowin", 4), 4, 256 * KiB) ==
        Algorithm::ring);
  // Nobody's memory readable (tcp): the thresholds' ring, not direct.
  CHECK(choose_all_reduce(AlgoRequest::automatic, t, access_of("tcp", 4), 4, 4 * MiB) ==
        Algorithm::ring);
  // The built-in table describes one host: across hosts the thresholds (hierarchical) decide; a
  // table the user named applies there too.
  t.table = {{0, Algorithm::rabenseifner}};
  t.table_is_builtin = true;
  CHECK(choose_all_reduce(AlgoRequest::automatic, t, access_of("hosts", 4), 4, 4 * MiB) ==
        Algorithm::hierarchical);
  t.table_is_builtin = false;
  CHECK(choose_all_reduce(AlgoRequest::automatic, t, access_of("hosts", 4), 4, 4 * MiB) ==
        Algorithm::rabenseifner);
}
