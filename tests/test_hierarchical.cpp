// The hierarchical all-reduce on simulated hosts: ranks as threads, each saying which host it is
// on (MeshOptions::host_id), so ranks of one host connect over shm and the others over tcp. The
// Gloo-style matrix (every dtype x op, awkward counts, in place and out of place) on 2x2, 2x3,
// 3x2 and interleaved hosts; when it is chosen automatically; when it is refused; and, from the
// trace, the bytes each host sends to the others: 1.0 x the buffer against the flat ring's 1.5 x
// on 2 hosts x 2 ranks.
#include <doctest/doctest.h>

#include <filesystem>
#include <map>
#include <nlohmann/json.hpp>

#include "collective_values.h"
#include "collectives/trace_files.h"
#include "comm_ranks.h"

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

TEST_CASE("several hosts with the same number of ranks choose it automatically above rd's sizes") {
  CommOptions options;
  options.name = "hier-auto";
  options.channels = 2;
  run_comm_on_hosts({"a", "a", "b", "b"}, options, [&](int rank, Communicator& comm) {
    CHECK(name_of(comm.all_reduce_algorithm(4096)) == "rd");
    CHECK(name_of(comm.all_reduce_algorithm(kMiB)) == "hierarchical");
    // ~4 M floats split over the two channels, each running the three phases.
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

// Bytes each host sent to other hosts in one traced all-reduce of `count` floats on 2 hosts x 2
// ranks (ranks 0, 1 on host a), by algorithm; every step is one chunk sent to its peer.
std::map<std::string, std::uint64_t> bytes_between_hosts(const std::string& algo,
                                                         std::size_t count) {
  namespace fs = std::filesystem;
  const fs::path dir = fs::temp_directory_path() / ("ringlet_hier_trace_" + algo);
  fs::remove_all(dir);
  CommOptions options;
  options.name = "hier-trace-" + algo;
  options.algo = algo;
  options.trace_dir = dir.string();
  const std::vector<std::string> hosts = {"a", "a", "b", "b"};
  run_comm_on_hosts(hosts, options, [&](int rank, Communicator& comm) {
    check_all_reduce(rank, comm, count, DType::f32, ReduceOp::sum, true);
  });  // communicators destroyed: every rank's trace file is written
  std::map<std::string, std::uint64_t> sent;
  for (const auto& trace : collectives::load_traces(dir.string(), "hierarchical test")) {
    for (const auto& e : trace.events) {
      if (e.value("ph", "") != "X" || !e.contains("args") || !e["args"].contains("peer")) continue;
      const int to = e["args"]["peer"].get<int>();
      if (hosts[trace.rank] != hosts[to]) {
        sent[hosts[trace.rank]] += e["args"]["bytes"].get<std::uint64_t>();
      }
    }
  }
  fs::remove_all(dir);
  return sent;
}

}  // namespace

TEST_CASE("from the trace: a host sends 2(h-1)/h x the buffer to others, the flat ring 2(n-1)/n") {
  const std::size_t count = std::size_t{1} << 20;  // 4 MiB of f32
  const std::uint64_t buffer = count * 4;
  const auto hierarchical = bytes_between_hosts("hierarchical", count);
  const auto ring = bytes_between_hosts("ring", count);
  for (const char* host : {"a", "b"}) {
    INFO("host ", host);
    CHECK(hierarchical.at(host) == buffer);  // 2 ranks x 2 x (1/2) x (buffer / 2)
    CHECK(ring.at(host) == buffer * 3 / 2);  // one ring link out: 2 x (3/4) x buffer
  }
}
