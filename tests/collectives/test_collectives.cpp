// Collectives as a Gloo-style matrix, ranks as threads over the real transports: world sizes
// 1..8, counts 0, 1, < n, not divisible by n x slice, and ~16 M (~2 M under a sanitizer); every
// dtype x op; in place and out of place; tcp, shm and emulated rdma; ring, recursive doubling,
// Rabenseifner's halving and doubling, the double binary tree, direct and window (shm); Bruck's
// and recursive doubling's all-gather, recursive halving's reduce-scatter. Data are small
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
#include "sanitized.h"
#include "temp_dir.h"

using namespace ringlet;
using namespace ringlet::testing;
using collectives::ReduceOp;
using core::DType;

namespace {

const auto kWait = 60s;

// The large all-reduce's count: 64 MiB, past the shm ring (4 MiB) and many slices per channel,
// and an odd tail. Under a sanitizer, whose instrumentation makes 64 MiB take over a minute there
// (85 s under TSan on 2 cores), 8 MiB: still past the ring, still many slices, the same tail.
#ifdef RINGLET_TEST_SANITIZED
constexpr std::size_t kLargeFloats = (std::size_t{2} << 20) + 3;
#else
constexpr std::size_t kLargeFloats = (std::size_t{16} << 20) + 3;
#endif

// body(rank, comm) on every rank of worlds of 1-8 ranks over `transport`, made with `options`.
void at_world_sizes_1_to_8(const std::string& transport, const CommOptions& options,
                           const std::function<void(int, Communicator&)>& body) {
  for (int n = 1; n <= 8; ++n) run_comm(n, transport, options, body);
}

CommOptions with_algo(const std::string& algo, const std::string& name) {
  CommOptions options;
  options.algo = algo;
  options.name = name;
  return options;
}

void matrix(const std::string& transport, const std::string& algo) {
  CommOptions options = with_algo(algo, "matrix");
  options.slice_bytes = 64;    // many slices even for small counts
  options.window_bytes = 256;  // pieces of 128 bytes: many window rounds too
  at_world_sizes_1_to_8(transport, options,
                        [](int rank, Communicator& comm) { check_all_reduce_matrix(rank, comm); });
}

// All-gather with `algo` at 1-8 ranks: blocks of 0, 1, 3 and 1031 elements, every dtype, in
// place (the send block is this rank's block of the result) and out of place.
void all_gather_matrix(const std::string& transport, const std::string& algo) {
  at_world_sizes_1_to_8(
      transport, with_algo(algo, "gather-matrix"), [](int rank, Communicator& comm) {
        const int n = comm.size();
        for (std::size_t block :
             {std::size_t{0}, std::size_t{1}, std::size_t{3}, std::size_t{1031}}) {
          for (DType dtype : kDTypes) {
            for (bool in_place : {false, true}) {
              INFO("n=", n, " block ", block, " ", core::dtype_name(dtype), " in place ", in_place);
              TypedBuffer mine(dtype, block), all(dtype, block * n);
              for (std::size_t i = 0; i < block * n; ++i) all.set(i, -1);
              TypedBuffer& source = in_place ? all : mine;
              const std::size_t at = in_place ? rank * block : 0;
              for (std::size_t i = 0; i < block; ++i)
                source.set(at + i, value(rank, i, ReduceOp::max));
              const auto* send =
                  static_cast<const char*>(source.data()) + at * core::dtype_size(dtype);
              comm.all_gather(send, all.data(), block, dtype)->wait(core::Deadline::after(kWait));
              for (int r = 0; r < n; ++r) {
                for (std::size_t i = 0; i < block; ++i) {
                  REQUIRE(all.get(r * block + i) == value(r, i, ReduceOp::max));
                }
              }
            }
          }
        }
      });
}

// Reduce-scatter with `algo` at 1-8 ranks: blocks of 0, 1, 3 and 1031 elements, every dtype x
// op, out of place and in place (the result lands in this rank's block of the input).
void reduce_scatter_matrix(const std::string& transport, const std::string& algo) {
  at_world_sizes_1_to_8(
      transport, with_algo(algo, "scatter-matrix"), [](int rank, Communicator& comm) {
        const int n = comm.size();
        for (std::size_t block :
             {std::size_t{0}, std::size_t{1}, std::size_t{3}, std::size_t{1031}}) {
          for (DType dtype : kDTypes) {
            for (ReduceOp op : kOps) {
              for (bool in_place : {false, true}) {
                INFO("n=", n, " block ", block, " ", core::dtype_name(dtype), " ",
                     std::string(collectives::reduce_op_name(op)), " in place ", in_place);
                TypedBuffer send(dtype, block * n), out(dtype, block);
                for (std::size_t i = 0; i < block * n; ++i) send.set(i, value(rank, i, op));
                char* recv = in_place ? static_cast<char*>(send.data()) +
                                            rank * block * core::dtype_size(dtype)
                                      : static_cast<char*>(out.data());
                comm.reduce_scatter(send.data(), recv, block, dtype, op)
                    ->wait(core::Deadline::after(kWait));
                const TypedBuffer& got = in_place ? send : out;
                const std::size_t at = in_place ? rank * block : 0;
                for (std::size_t i = 0; i < block; ++i) {
                  REQUIRE(got.get(at + i) == expected(n, rank * block + i, op, dtype));
                }
              }
            }
          }
        }
      });
}

}  // namespace

TEST_CASE("reduce_scatter matrix: recursive halving over shm") {
  reduce_scatter_matrix("shm", "rabenseifner");
}
TEST_CASE("reduce_scatter matrix: recursive halving over tcp") {
  reduce_scatter_matrix("tcp", "rabenseifner");
}
TEST_CASE("reduce_scatter matrix: recursive halving over rdma (emulated device)") {
  EmulatedRdma device;
  reduce_scatter_matrix("rdma", "rabenseifner");
}
TEST_CASE("reduce_scatter matrix: ring over shm") { reduce_scatter_matrix("shm", "ring"); }
TEST_CASE("all_gather matrix: recursive doubling over shm") {
  all_gather_matrix("shm", "rabenseifner");
}
TEST_CASE("all_gather matrix: recursive doubling over tcp") {
  all_gather_matrix("tcp", "rabenseifner");
}
TEST_CASE("all_gather matrix: recursive doubling over rdma (emulated device)") {
  EmulatedRdma device;
  all_gather_matrix("rdma", "rabenseifner");
}
TEST_CASE("all_gather matrix: Bruck over shm") { all_gather_matrix("shm", "bruck"); }
TEST_CASE("all_gather matrix: Bruck over tcp") { all_gather_matrix("tcp", "bruck"); }
TEST_CASE("all_gather matrix: Bruck over rdma (emulated device)") {
  EmulatedRdma device;
  all_gather_matrix("rdma", "bruck");
}

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
TEST_CASE("all_reduce matrix: rabenseifner over shm") { matrix("shm", "rabenseifner"); }
TEST_CASE("all_reduce matrix: rabenseifner over tcp") { matrix("tcp", "rabenseifner"); }
TEST_CASE("all_reduce matrix: rabenseifner over rdma (emulated device)") {
  EmulatedRdma device;
  matrix("rdma", "rabenseifner");
}
TEST_CASE("all_reduce matrix: double binary tree over shm") { matrix("shm", "tree"); }
TEST_CASE("all_reduce matrix: double binary tree over tcp") { matrix("tcp", "tree"); }
TEST_CASE("all_reduce matrix: double binary tree over rdma (emulated device)") {
  EmulatedRdma device;
  matrix("rdma", "tree");
}
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

// Recursive doubling's messages (the whole buffer) are larger than the shm ring: received the
// usual way, not in place (which waited for the whole message in the ring, for ever).
TEST_CASE("a large all_reduce, two channels, tcp and shm (ring, direct, window, rd)") {
  for (const auto& [transport, algo] :
       {std::pair{"shm", "ring"}, std::pair{"shm", "auto"}, std::pair{"shm", "direct"},
        std::pair{"tcp", "auto"}, std::pair{"shm", "rd"}}) {
    for (int n : {2, 3}) {
      CommOptions options;
      options.channels = 2;
      options.algo = algo;
      options.name = "large";
      run_comm(n, transport, options, [&](int rank, Communicator& comm) {
        check_all_reduce(rank, comm, kLargeFloats, DType::f32, ReduceOp::sum, rank % 2 == 0);
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

TEST_CASE("gather, scatter, all_to_all (equal and per-peer counts), u8 reductions") {
  for (const char* transport : {"shm", "tcp"}) {
    for (int n : {1, 2, 3, 5}) {
      INFO("transport ", transport, " n=", n);
      CommOptions options;
      options.name = "personalized";
      run_comm(n, transport, options, [&](int rank, Communicator& comm) {
        const auto deadline = [] { return core::Deadline::after(kWait); };
        for (std::size_t block : {std::size_t{0}, std::size_t{1}, std::size_t{777}}) {
          for (DType dtype : {DType::f32, DType::f16, DType::i64, DType::u8}) {
            for (int root = 0; root < n; ++root) {
              TypedBuffer mine(dtype, block), all(dtype, block * n);
              for (std::size_t i = 0; i < block; ++i) mine.set(i, (rank * 7 + i) % 100);
              comm.gather(mine.data(), rank == root ? all.data() : nullptr, block, dtype, root)
                  ->wait(deadline());
              for (int r = 0; rank == root && r < n; ++r) {
                for (std::size_t i = 0; i < block; ++i) {
                  REQUIRE(all.get(r * block + i) == (r * 7 + i) % 100);
                }
              }
              TypedBuffer source(dtype, block * n), got(dtype, block);
              for (std::size_t i = 0; i < block * n; ++i) source.set(i, (i + root) % 50);
              comm.scatter(rank == root ? source.data() : nullptr, got.data(), block, dtype, root)
                  ->wait(deadline());
              for (std::size_t i = 0; i < block; ++i) {
                REQUIRE(got.get(i) == (rank * block + i + root) % 50);
              }
            }
            // Equal blocks: block p of rank r's input is (r, p, i).
            TypedBuffer send(dtype, block * n), recv(dtype, block * n);
            for (int p = 0; p < n; ++p) {
              for (std::size_t i = 0; i < block; ++i)
                send.set(p * block + i, (rank * 10 + p + i) % 90);
            }
            comm.all_to_all(send.data(), recv.data(), block, dtype)->wait(deadline());
            for (int p = 0; p < n; ++p) {
              for (std::size_t i = 0; i < block; ++i) {
                REQUIRE(recv.get(p * block + i) == (p * 10 + rank + i) % 90);
              }
            }
          }
        }
        // Per-peer counts: rank r sends r + p elements to rank p, one fewer to rank 1 (rank 0's
        // blocks for itself and for rank 1 are empty), valued 100 r + p.
        std::vector<std::size_t> send_counts(n), send_offsets(n), recv_counts(n), recv_offsets(n);
        std::size_t sent = 0, received = 0;
        for (int p = 0; p < n; ++p) {
          send_counts[p] = rank + p - (p == 1 ? 1 : 0);
          recv_counts[p] = p + rank - (rank == 1 ? 1 : 0);
          send_offsets[p] = sent;
          recv_offsets[p] = received;
          sent += send_counts[p];
          received += recv_counts[p];
        }
        std::vector<std::int32_t> out(sent), in(received, -1);
        for (int p = 0; p < n; ++p) {
          std::fill_n(out.begin() + send_offsets[p], send_counts[p], 100 * rank + p);
        }
        comm.all_to_all(out.data(), send_counts, send_offsets, in.data(), recv_counts, recv_offsets,
                        DType::i32)
            ->wait(deadline());
        for (int p = 0; p < n; ++p) {
          for (std::size_t i = 0; i < recv_counts[p]; ++i) {
            REQUIRE(in[recv_offsets[p] + i] == 100 * p + rank);
          }
        }
        // u8 all-reduce (sum wraps; max)
        std::vector<std::uint8_t> bytes(1001, static_cast<std::uint8_t>(200 + rank));
        comm.all_reduce(bytes.data(), bytes.data(), bytes.size(), DType::u8, ReduceOp::max)
            ->wait(deadline());
        CHECK(bytes == std::vector<std::uint8_t>(1001, static_cast<std::uint8_t>(200 + n - 1)));
      });
    }
  }
}

TEST_CASE("a block of another length than its receiver expects fails both ranks, naming them") {
  CommOptions options;
  options.name = "a2a-mismatch";
  options.timeout = 20s;
  std::vector<std::string> errors(2);
  run_comm(2, "shm", options, [&](int rank, Communicator& comm) {
    std::vector<float> out(8, 1.0f), in(8, 0.0f);
    // Rank 0 sends rank 1 two elements; rank 1 expects three.
    const std::vector<std::size_t> send =
        rank == 0 ? std::vector<std::size_t>{1, 2} : std::vector<std::size_t>{2, 1};
    const std::vector<std::size_t> recv =
        rank == 0 ? std::vector<std::size_t>{1, 2} : std::vector<std::size_t>{3, 1};
    try {
      comm.all_to_all(out.data(), send, {0, 4}, in.data(), recv, {0, 4}, DType::f32)
          ->wait(core::Deadline::after(30s));
      comm.barrier()->wait(core::Deadline::after(30s));  // rank 1 failed: this fails here
    } catch (const std::exception& e) {
      errors[rank] = e.what();
    }
  });
  INFO(errors[0], " | ", errors[1]);
  CHECK(errors[1].find("rank 0 sent a block of 8 bytes where 12 were expected") !=
        std::string::npos);
  CHECK(errors[1].find("all_to_all seq 0") != std::string::npos);
  CHECK(!errors[0].empty());
}

TEST_CASE("new_group: sub-communicators over chosen ranks, in the order given, beside the parent") {
  for (const char* transport : {"shm", "tcp"}) {
    INFO("transport ", transport);
    CommOptions options;
    options.name = "groups";
    run_comm(4, transport, options, [&](int rank, Communicator& comm) {
      const auto deadline = core::Deadline::after(kWait);
      auto odd = comm.new_group({3, 1}, deadline);  // rank 3 is rank 0 of this group
      auto all = comm.new_group({0, 1, 2, 3}, deadline);
      CHECK((odd != nullptr) == (rank % 2 == 1));
      REQUIRE(all != nullptr);
      CHECK(all->rank() == rank);
      std::vector<double> x(1000, rank + 1.0);
      if (odd) {
        CHECK(odd->size() == 2);
        CHECK(odd->rank() == (rank == 3 ? 0 : 1));
        odd->all_reduce(x.data(), x.data(), x.size(), DType::f64, ReduceOp::sum)->wait(deadline);
        CHECK(x == std::vector<double>(1000, 6.0));  // 2 + 4
        std::int64_t v = rank;
        odd->broadcast(&v, 1, DType::i64, 0)->wait(deadline);
        CHECK(v == 3);
      }
      std::vector<double> y(10, 1.0);
      all->all_reduce(y.data(), y.data(), y.size(), DType::f64, ReduceOp::sum)->wait(deadline);
      comm.all_reduce(y.data(), y.data(), y.size(), DType::f64, ReduceOp::sum)->wait(deadline);
      CHECK(y == std::vector<double>(10, 16.0));
    });
  }
}

TEST_CASE("argument errors are immediate and name the problem") {
  CommOptions options;
  options.name = "args";
  run_comm(2, "shm", options, [](int, Communicator& comm) {
    float x = 0;
    CHECK_THROWS_WITH_AS(
        comm.all_to_all(&x, {1}, {0}, &x, {1}, {0}, DType::f32),
        doctest::Contains("1 counts or offsets given for a communicator of size 2"),
        core::ValueError);
    CHECK_THROWS_WITH_AS(comm.new_group({0, 0}, core::Deadline::after(1s)),
                         doctest::Contains("rank 0 is listed twice"), core::ValueError);
    CHECK_THROWS_WITH_AS(comm.broadcast(&x, 1, DType::f32, 5),
                         doctest::Contains("root 5 is outside the communicator of size 2"),
                         core::ValueError);
    CHECK_THROWS_WITH_AS(comm.all_reduce(nullptr, &x, 4, DType::f32, ReduceOp::sum),
                         doctest::Contains("send buffer is null"), core::ValueError);
    CHECK_THROWS_WITH_AS(comm.send(&x, 1, DType::f32, comm.rank()),
                         doctest::Contains("cannot send to itself"), core::ValueError);
    // A Work's wait() with no deadline waits as long as the communicator's timeout.
    const collectives::WorkPtr work = comm.barrier();
    CHECK(work->timeout() == comm.timeout());
    work->wait();
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
