// Collectives with ranks as separate processes (2 and 4), over tcp and shm: every op kind
// with several dtypes and reduce ops, checked exactly on every rank. Rank 0 is this process
// (it hosts the store); the others are forked before any thread exists and report through
// their exit status.
#include <doctest/doctest.h>

#include <algorithm>
#include <array>

#include "comm_ranks.h"
#include "emulated_rdma.h"

using namespace ringlet;
using namespace ringlet::testing;
using collectives::ReduceOp;
using core::DType;

namespace {

// Runs every collective once and returns the number of wrong elements seen by this rank.
int exercise(Communicator& comm) {
  const int n = comm.size(), rank = comm.rank();
  const auto deadline = [] { return core::Deadline::after(60s); };
  int wrong = 0;
  for (DType dtype : {DType::f32, DType::f64, DType::bf16, DType::i32}) {
    for (std::size_t count : {std::size_t{1}, std::size_t{1000}, std::size_t{300000}}) {
      TypedBuffer a(dtype, count);
      for (std::size_t i = 0; i < count; ++i) a.set(i, static_cast<double>((rank + i) % 13));
      comm.all_reduce(a.data(), a.data(), count, dtype, ReduceOp::sum)->wait(deadline());
      for (std::size_t i = 0; i < count; ++i) {
        double expect = 0;
        for (int r = 0; r < n; ++r) expect += static_cast<double>((r + i) % 13);
        wrong += a.get(i) != expect;
      }
      TypedBuffer mx(dtype, count);
      for (std::size_t i = 0; i < count; ++i) mx.set(i, static_cast<double>((rank * 5 + i) % 17));
      comm.all_reduce(mx.data(), mx.data(), count, dtype, ReduceOp::max)->wait(deadline());
      for (std::size_t i = 0; i < count; ++i) {
        double expect = 0;
        for (int r = 0; r < n; ++r)
          expect = std::max(expect, static_cast<double>((r * 5 + i) % 17));
        wrong += mx.get(i) != expect;
      }
      TypedBuffer mine(dtype, count), all(dtype, count * n);
      for (std::size_t i = 0; i < count; ++i) mine.set(i, static_cast<double>(rank));
      comm.all_gather(mine.data(), all.data(), count, dtype)->wait(deadline());
      for (std::size_t i = 0; i < count * n; ++i)
        wrong += all.get(i) != static_cast<double>(i / count);
      TypedBuffer b(dtype, count);
      for (std::size_t i = 0; i < count; ++i) b.set(i, rank == n - 1 ? 7.0 : 0.0);
      comm.broadcast(b.data(), count, dtype, n - 1)->wait(deadline());
      for (std::size_t i = 0; i < count; ++i) wrong += b.get(i) != 7.0;
    }
  }
  comm.barrier()->wait(deadline());
  return wrong;
}

void run_processes(int n, const std::string& transport) {
  std::vector<std::array<int, 2>> pipes(n);
  std::vector<pid_t> children;
  for (int r = 1; r < n; ++r) {
    REQUIRE(::pipe(pipes[r].data()) == 0);
    const pid_t pid = ::fork();
    REQUIRE(pid >= 0);
    if (pid == 0) {
      int port = 0, status = 3;
      if (::read(pipes[r][0], &port, sizeof port) == static_cast<ssize_t>(sizeof port)) {
        try {
          transport::TcpStore store("127.0.0.1", port, core::Deadline::after(30s));
          CommOptions options;
          options.name = "procs";
          auto comm = Communicator::create(store, mesh_options(r, n, transport, "m"), options,
                                           core::Deadline::after(30s));
          status = exercise(*comm) == 0 ? 0 : 1;
          transport::store_barrier(store, "procs/end", n, core::Deadline::after(60s));
        } catch (const std::exception& e) {
          std::fprintf(stderr, "rank %d: %s\n", r, e.what());
          status = 2;
        }
      }
      ::_exit(status);
    }
    children.push_back(pid);
    ::close(pipes[r][0]);
  }
  transport::TcpStoreServer server("127.0.0.1", 0);
  const int port = server.port();
  for (int r = 1; r < n; ++r) {
    REQUIRE(::write(pipes[r][1], &port, sizeof port) == static_cast<ssize_t>(sizeof port));
    ::close(pipes[r][1]);
  }
  {
    transport::TcpStore store("127.0.0.1", port, core::Deadline::after(30s));
    CommOptions options;
    options.name = "procs";
    auto comm = Communicator::create(store, mesh_options(0, n, transport, "m"), options,
                                     core::Deadline::after(30s));
    CHECK(exercise(*comm) == 0);
    transport::store_barrier(store, "procs/end", n, core::Deadline::after(60s));
  }
  for (pid_t pid : children) CHECK(wait_child(pid) == 0);
  server.wait_until_idle(core::Deadline::after(10s));
}

}  // namespace

TEST_CASE("2 processes over tcp") { run_processes(2, "tcp"); }
TEST_CASE("2 and 4 processes over rdma (emulated device)") {
  testing::EmulatedRdma device;
  run_processes(2, "rdma");
  run_processes(4, "rdma");
}
TEST_CASE("2 processes over shm") { run_processes(2, "shm"); }
TEST_CASE("4 processes over tcp") { run_processes(4, "tcp"); }
TEST_CASE("4 processes over shm") { run_processes(4, "shm"); }
