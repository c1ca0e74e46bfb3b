// The hierarchical all-reduce on simulated hosts: ranks as threads, each saying which host it is
// on (MeshOptions::host_id), so ranks of one host connect over shm and the others over tcp. The
// Gloo-style matrix (every dtype x op, awkward counts, in place and out of place) on 2x2, 2x3,
// 3x2 and interleaved hosts, in one piece and pipelined in many; when it is chosen
// automatically; when it is refused; a rank aborting mid-op failing the pipelined op at once;
// and, from the trace, the bytes each host sends to the others (1.0 x the buffer against the
// flat ring's 1.5 x on 2 hosts x 2 ranks) and the pipelined op's two rows of steps.
#include <doctest/doctest.h>

#include <chrono>
#include <filesystem>
#include <map>
#include <nlohmann/json.hpp>
#include <thread>

#include "collective_values.h"
#include "collectives/trace.h"
#include "collectives/trace_files.h"
#include "comm_ranks.h"
#include "temp_dir.h"

using namespace ringlet;
using namespace ringlet::testing;
using collectives::Algorithm;
using collectives::ReduceOp;
using core::DType;

namespace {

constexpr std::size_t kMiB = 1024 * 1024;

std::string name_of(Algorithm a) { return collectives::algorithm_name(a); }

}  // namespace

TEST_CASE("hierarchical all-reduce matrix on simulated hosts (2x2, interleaved, 2x3, 3x2)") {
  const std::vector<std::vector<std::string>> layouts = {
      {"a", "a", "b", "b"},
      {"a", "b", "a", "b"},
      {"a", "a", "a", "b", "b", "b"},
      {"a", "a", "b", "b", "c", "c"},
  };
  for (const auto& hosts : layouts) {
    CommOptions options;
    options.algo = "hierarchical";
    options.slice_bytes = 64;  // many slices even for small counts
    options.name = "hier";
    run_comm_on_hosts(hosts, options, [&](int rank, Communicator& comm) {
      CHECK(comm.transports() == "shm+tcp");
      CHECK(name_of(comm.all_reduce_algorithm(4)) == "hierarchical");
      check_all_reduce_matrix(rank, comm);
    });
  }
}

TEST_CASE("pipelined in pieces (the host ring on its own thread): the same matrix") {
  for (const auto& hosts : std::vector<std::vector<std::string>>{{"a", "a", "b", "b"},
                                                                 {"a", "a", "b", "b", "c", "c"}}) {
    CommOptions options;
    options.algo = "hierarchical";
    options.slice_bytes = 64;
    options.piece_bytes = 200;  // 1031 elements: 10 to 41 pieces, each a few slices
    options.name = "hier-pieces";
    run_comm_on_hosts(hosts, options,
                      [&](int rank, Communicator& comm) { check_all_reduce_matrix(rank, comm); });
    // A piece per element: pieces whose parts are empty on some local ranks.
    options.piece_bytes = 1;
    options.name = "hier-tiny-pieces";
    run_comm_on_hosts(hosts, options, [&](int rank, Communicator& comm) {
      for (std::size_t count : {2, 5, 7}) {
        for (bool in_place : {false, true}) {
          check_all_reduce(rank, comm, count, DType::f32, ReduceOp::sum, in_place);
        }
      }
    });
  }
}

TEST_CASE("several hosts with the same number of ranks choose it automatically above rd's sizes") {
  CommOptions options;
  options.name = "hier-auto";
  options.channels = 2;
  run_comm_on_hosts({"a", "a", "b", "b"}, options, [&](int rank, Communicator& comm) {
    CHECK(name_of(comm.all_reduce_algorithm(4096)) == "rd");
    CHECK(name_of(comm.all_reduce_algorithm(kMiB)) == "hierarchical");
    // ~4 M floats split over the two channels, each running the three phases in two 4 MiB
    // pieces (two host-ring threads at once).
    check_all_reduce(rank, comm, (std::size_t{4} << 20) + 3, DType::f32, ReduceOp::sum,
                     rank % 2 == 0);
  });
  options.name = "uneven";
  options.channels = 1;
  run_comm_on_hosts({"a", "a", "b", "c"}, options, [&](int rank, Communicator& comm) {
    CHECK(name_of(comm.all_reduce_algorithm(kMiB)) == "ring");
    check_all_reduce(rank, comm, 1031, DType::f32, ReduceOp::sum, true);
  });
}

TEST_CASE("RINGLET_ALGO=hierarchical on one host or uneven hosts is refused, naming the shape") {
  CommOptions options;
  options.algo = "hierarchical";
  options.name = "hier-one-host";
  CHECK_THROWS_WITH_AS(run_comm(2, "shm", options, [](int, Communicator&) {}),
                       doctest::Contains("these ranks are on 1 host x 2 rank(s)"),
                       core::ValueError);
  options.name = "hier-uneven";
  CHECK_THROWS_WITH_AS(run_comm_on_hosts({"a", "a", "b"}, options, [](int, Communicator&) {}),
                       doctest::Contains("these ranks are on 2 hosts: 2+1 ranks"),
                       core::ValueError);
}

TEST_CASE("a rank with another reduce op fails every rank with a fingerprint mismatch") {
  // Rank 1's global right neighbour (rank 2) checks it, and so does each of its own rings'
  // right neighbours (rank 0 on the host, rank 3 across) before taking any of its data.
  for (int odd : {1, 2}) {
    std::vector<std::string> errors(4);
    CommOptions options;
    options.name = "hier-mismatch-" + std::to_string(odd);
    options.algo = "hierarchical";
    run_comm_on_hosts({"a", "a", "b", "b"}, options, [&](int rank, Communicator& comm) {
      std::vector<float> data(1 << 18, 1.0f);
      const ReduceOp op = rank == odd ? ReduceOp::max : ReduceOp::sum;
      try {
        comm.all_reduce(data.data(), data.data(), data.size(), DType::f32, op)
            ->wait(core::Deadline::after(30s));
      } catch (const core::CollectiveError& e) {
        errors[rank] = e.what();
      }
    });
    for (int r = 0; r < 4; ++r) {
      INFO("odd rank ", odd, ", rank ", r, ": ", errors[r]);
      CHECK(errors[r].find("fingerprint mismatch") != std::string::npos);
    }
    // The odd rank's right neighbours on its host and across hosts took none of its data: each
    // waited for its fingerprint first (which, over tcp, may never come once it failed).
    const int local_right = odd ^ 1, cross_right = (odd + 2) % 4;
    for (int r : {local_right, cross_right}) {
      const std::string own = errors[r].substr(0, errors[r].find('\n'));
      INFO("odd rank ", odd, ", rank ", r, ": ", own);
      CHECK(own.find("waiting for rank " + std::to_string(odd) + " after 0 bytes: ") !=
            std::string::npos);
    }
  }
}

namespace {

// One traced all-reduce of `count` floats on 2 hosts x 2 ranks (ranks 0, 1 on host a), by
// algorithm: the bytes each host sent to other hosts (every step is one chunk sent to its
// peer), and each phase's steps of rank 0 by trace row.
struct TracedRun {
  std::map<std::string, std::uint64_t> sent;
  std::map<std::string, std::map<int, int>> rank0_steps;  // phase -> row -> steps
};

TracedRun traced_all_reduce(const std::string& algo, std::size_t count,
                            std::int64_t piece_bytes = 0) {
  namespace fs = std::filesystem;
  const fs::path dir = ringlet::testing::process_temp_path("ringlet_hier_trace_" + algo);
  fs::remove_all(dir);
  CommOptions options;
  options.name = "hier-trace-" + algo;
  options.algo = algo;
  options.piece_bytes = piece_bytes;
  options.trace_dir = dir.string();
  const std::vector<std::string> hosts = {"a", "a", "b", "b"};
  run_comm_on_hosts(hosts, options, [&](int rank, Communicator& comm) {
    check_all_reduce(rank, comm, count, DType::f32, ReduceOp::sum, true);
  });  // communicators destroyed: every rank's trace file is written
  TracedRun run;
  for (const auto& trace : collectives::load_traces(dir.string(), "hierarchical test")) {
    for (const auto& e : trace.events) {
      if (e.value("ph", "") != "X" || !e.contains("args") || !e["args"].contains("peer")) continue;
      const int to = e["args"]["peer"].get<int>();
      if (hosts[trace.rank] != hosts[to]) {
        run.sent[hosts[trace.rank]] += e["args"]["bytes"].get<std::uint64_t>();
      }
      if (trace.rank == 0) ++run.rank0_steps[e["args"]["phase"].get<std::string>()][e["tid"]];
    }
  }
  fs::remove_all(dir);
  return run;
}

}  // namespace

TEST_CASE("from the trace: a host sends 2(h-1)/h x the buffer to others, the flat ring 2(n-1)/n") {
  const std::size_t count = std::size_t{1} << 20;  // 4 MiB of f32
  const std::uint64_t buffer = count * 4;
  const auto hierarchical = traced_all_reduce("hierarchical", count).sent;
  const auto ring = traced_all_reduce("ring", count).sent;
  const auto pipelined = traced_all_reduce("hierarchical", count, std::int64_t{1} << 20).sent;
  for (const char* host : {"a", "b"}) {
    INFO("host ", host);
    CHECK(hierarchical.at(host) == buffer);  // 2 ranks x 2 x (1/2) x (buffer / 2)
    CHECK(pipelined.at(host) == buffer);     // the same, in 4 pieces
    CHECK(ring.at(host) == buffer * 3 / 2);  // one ring link out: 2 x (3/4) x buffer
  }
}

TEST_CASE("from the trace: pipelined, the host ring's steps have a row of their own, by piece") {
  const std::size_t count = std::size_t{1} << 20;  // 4 MiB of f32 in 4 pieces of 1 MiB
  const auto steps = traced_all_reduce("hierarchical", count, std::int64_t{1} << 20).rank0_steps;
  // Rings of 2: each phase of each piece is one step.
  const std::map<int, int> host_row{{collectives::kHostRingLane, 4}}, channel_row{{0, 4}};
  CHECK(steps.at("local RS") == host_row);
  CHECK(steps.at("local AG") == host_row);
  CHECK(steps.at("cross RS") == channel_row);
  CHECK(steps.at("cross AG") == channel_row);
  // In one piece (piece_bytes 0), every phase runs on the channel's row.
  const auto in_order = traced_all_reduce("hierarchical", count).rank0_steps;
  CHECK(in_order.at("local RS") == (std::map<int, int>{{0, 1}}));
  CHECK(in_order.at("local AG") == (std::map<int, int>{{0, 1}}));
}

TEST_CASE("pipelined: a rank that aborts mid-op fails every other rank well before the deadline") {
  // Rank 3 (host b) aborts its communicator while an op runs. Rank 2 reaches it only through
  // its host ring's thread, and still names it; ranks 0 and 1 fail as the failure spreads. No
  // rank waits for the 20 s deadline.
  std::vector<std::string> errors(4);
  std::vector<std::chrono::steady_clock::duration> took(4);
  CommOptions options;
  options.name = "hier-abort";
  options.algo = "hierarchical";
  options.piece_bytes = 64 * 1024;
  options.timeout = 20000ms;
  run_comm_on_hosts({"a", "a", "b", "b"}, options, [&](int rank, Communicator& comm) {
    std::vector<float> data(std::size_t{4} << 20, 1.0f);  // 16 MiB: 256 pieces
    const auto start = std::chrono::steady_clock::now();
    for (int i = 0; i < 50 && errors[rank].empty(); ++i) {  // bounded: until the abort lands
      auto work = comm.all_reduce(data.data(), data.data(), data.size(), DType::f32, ReduceOp::sum);
      if (rank == 3 && i == 1) {
        std::this_thread::sleep_for(10ms);
        comm.abort("rank 3 leaves mid-op (test)");
      }
      try {
        work->wait(core::Deadline::after(60s));
      } catch (const core::Error& e) {
        errors[rank] = e.what();
      }
    }
    took[rank] = std::chrono::steady_clock::now() - start;
  });
  for (int r = 0; r < 4; ++r) {
    INFO("rank ", r, ": ", errors[r]);
    CHECK(!errors[r].empty());
    CHECK(took[r] < 10s);
  }
  INFO(errors[2]);
  CHECK(errors[2].find("waiting for rank 3") != std::string::npos);
}
