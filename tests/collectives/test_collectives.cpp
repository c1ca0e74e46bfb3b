// Collectives as a Gloo-style matrix, ranks as threads over the real transports: world sizes
// 1..8, counts 0, 1, < n, not divisible by n x slice, and ~16 M; every dtype x op; in place and
// out of place; tcp and shm; ring, recursive doubling, direct and window (shm). Data are small
// integers, so every result is exact (f16/bf16 included: every value involved is exactly
// representable).
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>

#include "collective_values.h"
#include "collectives/reduce_kernels.h"
#include "collectives/trace.h"
#include "collectives/trace_files.h"
#include "comm_ranks.h"
#include "emulated_rdma.h"
#include "temp_dir.h"

using namespace ringlet;
using namespace ringlet::testing;
using collectives::ReduceOp;
using core::DType;

namespace {

const auto kWait = 60s;

void matrix(const std::string& transport, const std::string& algo) {
  for (int n = 1; n <= 8; ++n) {
    CommOptions options;
    options.algo = algo;
    options.slice_bytes = 64;    // many slices even for small counts
    options.window_bytes = 256;  // pieces of 128 bytes: many window rounds too
    options.name = "matrix";
    run_comm(n, transport, options,
             [&](int rank, Communicator& comm) { check_all_reduce_matrix(rank, comm); });
  }
}

}  // namespace

TEST_CASE("all_reduce matrix: ring over shm") { matrix("shm", "ring"); }
TEST_CASE("all_reduce matrix: ring over tcp") { matrix("tcp", "ring"); }
TEST_CASE("all_reduce matrix: ring over rdma (emulated device)") {
  EmulatedRdma device;
  matrix("rdma", "ring");
}
TEST_CASE("all_reduce matrix: recursive doubling over rdma (emulated device)") {
  EmulatedRdma device;
  matrix("rdma", "rd");
}
TEST_CASE("all_reduce matrix: recursive doubling over shm") { matrix("shm", "rd"); }
TEST_CASE("all_reduce matrix: recursive doubling over tcp") { matrix("tcp", "rd"); }
TEST_CASE("all_reduce matrix: direct (cross-memory attach) over shm") { matrix("shm", "direct"); }
TEST_CASE("all_reduce matrix: shared windows over shm") { matrix("shm", "window"); }

TEST_CASE("window all-reduce needs shared windows: refused over tcp and with no window size") {
  for (const auto& entry : {std::pair{"tcp", -1}, std::pair{"shm", 0}}) {
    const auto& transport = entry.first;
    const auto& bytes = entry.second;
    INFO(transport, " window_bytes ", bytes);
    CommOptions options;
    options.algo = "window";
    options.window_bytes = bytes;
    options.name = std::string("no-window-") + transport;
    CHECK_THROWS_WITH_AS(run_comm(2, transport, options, [](int, Communicator&) {}),
                         doctest::Contains("RINGLET_ALGO=window needs"), core::ValueError);
  }
}

TEST_CASE("all_reduce of ~16 M floats, two channels, tcp and shm (ring, direct, window)") {
  for (const auto& [transport, algo] : {std::pair{"shm", "ring"}, std::pair{"shm", "auto"},
                                        std::pair{"shm", "direct"}, std::pair{"tcp", "auto"}}) {
    for (int n : {2, 3}) {
      CommOptions options;
      options.channels = 2;
      options.algo = algo;
      options.name = "large";
      run_comm(n, transport, options, [&](int rank, Communicator& comm) {
        check_all_reduce(rank, comm, (std::size_t{16} << 20) + 3, DType::f32, ReduceOp::sum,
                         rank % 2 == 0);
      });
    }
  }
}

TEST_CASE("a small collective on an idle channel runs on the calling thread; order is kept") {
  for (const char* transport : {"shm", "tcp"}) {
    CommOptions options;
    options.name = std::string("inline-") + transport;
    run_comm(2, transport, options, [&](int rank, Communicator& comm) {
      std::vector<float> small(16, static_cast<float>(rank + 1));
      auto work =
          comm.all_reduce(small.data(), small.data(), small.size(), DType::f32, ReduceOp::sum);
      CHECK(work->done());  // nothing was queued: it ran inline and is finished
      work->wait(core::Deadline::after(10s));
      CHECK(small == std::vector<float>(16, 3.0f));
      // Behind a queued large op, a small one waits its turn (and so cannot run inline).
      std::vector<float> large(std::size_t{4} << 20, static_cast<float>(rank + 1));
      auto first =
          comm.all_reduce(large.data(), large.data(), large.size(), DType::f32, ReduceOp::sum);
      std::vector<float> after(16, static_cast<float>(10 * (rank + 1)));
      auto second =
          comm.all_reduce(after.data(), after.data(), after.size(), DType::f32, ReduceOp::sum);
      second->wait(core::Deadline::after(60s));
      CHECK(first->done());
      first->wait(core::Deadline::after(60s));
      CHECK(large.front() == 3.0f);
      CHECK(large.back() == 3.0f);
      CHECK(after == std::vector<float>(16, 30.0f));
    });
  }
}

TEST_CASE("reduce_scatter, all_gather, broadcast, reduce, barrier, send/recv") {
  for (const char* transport : {"shm", "tcp"}) {
    for (int n : {1, 2, 3, 5, 8}) {
      INFO("transport ", transport, " n=", n);
      CommOptions options;
      options.slice_bytes = 256;
      options.name = "others";
      run_comm(n, transport, options, [&](int rank, Communicator& comm) {
        const auto deadline = [] { return core::Deadline::after(kWait); };
        for (std::size_t block : {std::size_t{0}, std::size_t{1}, std::size_t{777}}) {
          for (DType dtype : {DType::f32, DType::bf16, DType::i64}) {
            // reduce_scatter (sum)
            TypedBuffer send(dtype, block * n), out(dtype, block);
            for (std::size_t i = 0; i < block * n; ++i) send.set(i, value(rank, i, ReduceOp::sum));
            comm.reduce_scatter(send.data(), out.data(), block, dtype, ReduceOp::sum)
                ->wait(deadline());
            for (std::size_t i = 0; i < block; ++i) {
              REQUIRE(out.get(i) == expected(n, rank * block + i, ReduceOp::sum, dtype));
            }
            // all_gather
            TypedBuffer mine(dtype, block), all(dtype, block * n);
            for (std::size_t i = 0; i < block; ++i) mine.set(i, value(rank, i, ReduceOp::max));
            comm.all_gather(mine.data(), all.data(), block, dtype)->wait(deadline());
            for (int r = 0; r < n; ++r) {
              for (std::size_t i = 0; i < block; ++i) {
                REQUIRE(all.get(r * block + i) == value(r, i, ReduceOp::max));
              }
            }
            // broadcast and reduce from every root
            for (int root = 0; root < n; ++root) {
              TypedBuffer b(dtype, block);
              for (std::size_t i = 0; i < block; ++i)
                b.set(i, rank == root ? value(root, i, ReduceOp::max) : -1);
              comm.broadcast(b.data(), block, dtype, root)->wait(deadline());
              for (std::size_t i = 0; i < block; ++i)
                REQUIRE(b.get(i) == value(root, i, ReduceOp::max));
              TypedBuffer contrib(dtype, block), result(dtype, block);
              for (std::size_t i = 0; i < block; ++i) contrib.set(i, value(rank, i, ReduceOp::max));
              comm.reduce(contrib.data(), result.data(), block, dtype, ReduceOp::max, root)
                  ->wait(deadline());
              if (rank == root) {
                for (std::size_t i = 0; i < block; ++i) {
                  REQUIRE(result.get(i) == expected(n, i, ReduceOp::max, dtype));
                }
              }
            }
          }
        }
        comm.barrier()->wait(deadline());
        if (n > 1) {  // a ring of sends and receives
          std::vector<std::int64_t> out(100, rank), in(100, -1);
          auto r = comm.recv(in.data(), in.size(), DType::i64, (rank + n - 1) % n);
          auto s = comm.send(out.data(), out.size(), DType::i64, (rank + 1) % n);
          s->wait(deadline());
          r->wait(deadline());
          CHECK(in == std::vector<std::int64_t>(100, (rank + n - 1) % n));
        }
      });
    }
  }
}

TEST_CASE("argument errors are immediate and name the problem") {
  CommOptions options;
  options.name = "args";
  run_comm(2, "shm", options, [](int, Communicator& comm) {
    float x = 0;
    CHECK_THROWS_WITH_AS(comm.all_reduce(&x, &x, 1, DType::u8, ReduceOp::sum),
                         doctest::Contains("dtype u8 is not supported"), core::DTypeError);
    CHECK_THROWS_WITH_AS(comm.broadcast(&x, 1, DType::f32, 5),
                         doctest::Contains("root 5 is outside the communicator of size 2"),
                         core::ValueError);
    CHECK_THROWS_WITH_AS(comm.all_reduce(nullptr, &x, 4, DType::f32, ReduceOp::sum),
                         doctest::Contains("send buffer is null"), core::ValueError);
    CHECK_THROWS_WITH_AS(comm.send(&x, 1, DType::f32, comm.rank()),
                         doctest::Contains("cannot send to itself"), core::ValueError);
  });
}

TEST_CASE("a traced 4-rank ring all-reduce shows 2(n-1) steps per rank, merged into one file") {
  namespace fs = std::filesystem;
  const fs::path dir = ringlet::testing::process_temp_path("ringlet_trace_test");
  fs::remove_all(dir);
  CommOptions options;
  options.name = "traced";
  options.algo = "ring";
  options.trace_dir = dir.string();
  run_comm(4, "shm", options, [](int rank, Communicator& comm) {
    std::vector<float> data(4096, static_cast<float>(rank));
    comm.all_reduce(data.data(), data.data(), data.size(), DType::f32, ReduceOp::sum)
        ->wait(core::Deadline::after(kWait));
  });  // communicators destroyed: every rank's trace file is written
  const fs::path merged = dir / "merged.json";
  collectives::merge_traces(dir.string(), merged.string());
  std::ifstream in(merged);
  const auto json = nlohmann::json::parse(in);
  std::map<int, std::vector<std::string>> steps;
  for (const auto& e : json["traceEvents"]) {
    if (e.value("ph", "") != "X") continue;
    CHECK(e["args"]["op"] == "all_reduce");
    steps[e["pid"].get<int>()].push_back(e["args"]["phase"].get<std::string>());
  }
  REQUIRE(steps.size() == 4);
  for (const auto& entry : steps) {
    const auto& rank = entry.first;
    const auto& phases = entry.second;
    INFO("rank ", rank);
    CHECK(phases.size() == 6);  // 2(n-1)
    CHECK(std::count(phases.begin(), phases.end(), "RS") == 3);
    CHECK(std::count(phases.begin(), phases.end(), "AG") == 3);
  }
  fs::remove_all(dir);
}
