// Collective failures: a Work's timeout names it; fingerprint mismatches (count, op) reach every
// rank with both fingerprints, under every algorithm; ranks slicing the ring differently are told
// so; a rank whose peer never calls times out with the op, seq and peer named; an aborted
// communicator fails later calls fast with the same cause; kill -9 of one process during a large
// all-reduce fails every survivor within the deadline, naming it.
#include <doctest/doctest.h>

#include <atomic>

#include "collectives/work_driver.h"
#include "comm_ranks.h"

using namespace ringlet;
using namespace ringlet::testing;
using collectives::ReduceOp;
using core::DType;

namespace {

std::string error_of(const collectives::WorkPtr& work, std::chrono::seconds limit = 30s) {
  try {
    work->wait(core::Deadline::after(limit));
  } catch (const core::CollectiveError& e) {
    return e.what();
  }
  return "";
}

}  // namespace

TEST_CASE("a Work still running times out naming its rank, op and seq; parts complete it") {
  collectives::Work work(3, "all_gather", 7, 2);
  CHECK(work.describe() == "rank 3: all_gather seq 7");
  CHECK_THROWS_WITH_AS(
      work.wait(core::Deadline::after(20ms)),
      "rank 3: all_gather seq 7: wait() timed out (the collective is still running)",
      core::TimeoutError);
  collectives::WorkDriver::part_done(work);
  CHECK_FALSE(work.done());
  collectives::WorkDriver::part_done(work);
  CHECK(work.done());
  CHECK_NOTHROW(work.wait(core::Deadline::after(1s)));
  // With no deadline, wait() waits as long as the Work's timeout (the communicator's).
  collectives::Work quick(0, "barrier", 1, 1, 20ms);
  CHECK_THROWS_WITH_AS(quick.wait(),
                       "rank 0: barrier seq 1: wait() timed out (the collective is still running)",
                       core::TimeoutError);
}

// Every algorithm checks the fingerprint in each message, also one it takes where it lies in the
// shm ring (recursive doubling, Rabenseifner's, the tree).
TEST_CASE("a rank with a different count fails every rank with both fingerprints") {
  for (const char* algo : {"auto", "rd", "rabenseifner", "tree", "ring"}) {
    std::vector<std::string> errors(3);
    CommOptions options;
    options.name = std::string("fp-count-") + algo;
    options.algo = algo;
    run_comm(3, "shm", options, [&](int rank, Communicator& comm) {
      std::vector<float> data(16, 1.0f);
      const std::size_t count = rank == 1 ? 10 : 11;
      errors[rank] =
          error_of(comm.all_reduce(data.data(), data.data(), count, DType::f32, ReduceOp::sum));
    });
    for (int r = 0; r < 3; ++r) {
      INFO(algo, ", rank ", r, ": ", errors[r]);
      CHECK(errors[r].find("rank " + std::to_string(r) + ": all_reduce seq 0 failed") !=
            std::string::npos);
      CHECK(errors[r].find("fingerprint mismatch") != std::string::npos);
      CHECK(errors[r].find("count=10") != std::string::npos);
      CHECK(errors[r].find("count=11") != std::string::npos);
    }
  }
}

// Bruck's all-gather, and the all-gather and reduce-scatter by doubling and halving, take their
// messages where they lie in the shm ring too: a rank with another count is found there.
TEST_CASE("all_gather and reduce_scatter with a different count fail every rank, over shm") {
  for (const char* algo : {"bruck", "rabenseifner"}) {
    for (const bool gather : {true, false}) {
      if (!gather && std::string(algo) == "bruck") continue;  // Bruck's is an all-gather
      std::vector<std::string> errors(3);
      CommOptions options;
      options.name = std::string("fp-count-") + algo + (gather ? "-ag" : "-rs");
      options.algo = algo;
      run_comm(3, "shm", options, [&](int rank, Communicator& comm) {
        std::vector<float> in(3 * 11, 1.0f), out(3 * 11);
        const std::size_t count = rank == 1 ? 10 : 11;
        errors[rank] = error_of(
            gather ? comm.all_gather(in.data(), out.data(), count, DType::f32)
                   : comm.reduce_scatter(in.data(), out.data(), count, DType::f32, ReduceOp::sum));
      });
      for (int r = 0; r < 3; ++r) {
        INFO(algo, gather ? " all_gather" : " reduce_scatter", ", rank ", r, ": ", errors[r]);
        CHECK(errors[r].find("fingerprint mismatch") != std::string::npos);
        CHECK(errors[r].find("count=10") != std::string::npos);
        CHECK(errors[r].find("count=11") != std::string::npos);
      }
    }
  }
}

TEST_CASE("a rank calling all_gather instead of all_reduce fails every rank") {
  std::vector<std::string> errors(2);
  CommOptions options;
  options.name = "fp-op";
  run_comm(2, "tcp", options, [&](int rank, Communicator& comm) {
    std::vector<float> data(8, 1.0f), out(16);
    auto work = rank == 0 ? comm.all_reduce(data.data(), data.data(), 8, DType::f32, ReduceOp::sum)
                          : comm.all_gather(data.data(), out.data(), 8, DType::f32);
    errors[rank] = error_of(work);
    // the communicator is aborted: later calls fail fast with the same cause
    const auto start = std::chrono::steady_clock::now();
    const std::string later = error_of(comm.barrier());
    CHECK(later.find("fingerprint mismatch") != std::string::npos);
    CHECK(std::chrono::steady_clock::now() - start < 1s);
    CHECK(comm.aborted());
  });
  for (int r = 0; r < 2; ++r) {
    INFO("rank ", r, ": ", errors[r]);
    CHECK(errors[r].find("fingerprint mismatch") != std::string::npos);
    CHECK(errors[r].find("all_reduce(") != std::string::npos);
    CHECK(errors[r].find("all_gather(") != std::string::npos);
  }
}

TEST_CASE("ranks that cut the ring's chunks into other slices fail, saying so") {
  // Ranks 0 and 1 send 4 KiB slices, ranks 2 and 3 1 KiB ones. Rank 0 receives rank 3's 1 KiB
  // slices where it expects 4 KiB: a shorter slice would otherwise be reduced with stale bytes
  // after it. (Rank 2 gets longer slices than it expects, which its transport refuses; rank 0
  // hears of that only through rank 3, after rank 3's first slices reached it.)
  std::vector<std::string> errors(4);
  run_comm_ranks(
      4, [](int r) { return mesh_options(r, 4, "tcp", "m"); },
      [](int r) {
        CommOptions o;
        o.name = "slices";
        o.algo = "ring";
        o.slice_bytes = r < 2 ? 4096 : 1024;
        o.timeout = 5000ms;
        return o;
      },
      [&](int rank, Communicator& comm) {
        std::vector<float> data(1 << 16, 1.0f);  // 256 KiB: chunks of 64 KiB
        errors[rank] = error_of(
            comm.all_reduce(data.data(), data.data(), data.size(), DType::f32, ReduceOp::sum));
      });
  INFO(errors[0], "\n", errors[2]);
  CHECK(errors[0].find("rank 0 received a 1024-byte slice from rank 3 where its ring expected "
                       "4096 bytes: the ranks cut the buffer differently") != std::string::npos);
  for (const std::string& e : errors) CHECK(!e.empty());
}

TEST_CASE("a peer that never calls: timeout naming the op, seq and peer") {
  CommOptions options;
  options.name = "silent";
  options.timeout = 1000ms;
  std::string error;
  std::chrono::steady_clock::duration took{};
  run_comm(2, "shm", options, [&](int rank, Communicator& comm) {
    std::vector<float> data(1000, 1.0f);
    if (rank == 0) {
      const auto start = std::chrono::steady_clock::now();
      error = error_of(
          comm.all_reduce(data.data(), data.data(), data.size(), DType::f32, ReduceOp::sum));
      took = std::chrono::steady_clock::now() - start;
    } else {
      std::this_thread::sleep_for(2500ms);  // never calls; leaves after rank 0 gave up
    }
  });
  INFO(error);
  CHECK(error.find("rank 0: all_reduce seq 0 failed waiting for rank 1") != std::string::npos);
  // The deadline is named with its unit.
  CHECK(error.find("its deadline of 1000 ms passed; RINGLET_TIMEOUT sets it, in milliseconds") !=
        std::string::npos);
  CHECK(took >= 900ms);
  CHECK(took < 2000ms);
}

TEST_CASE("kill -9 of one process during a large all-reduce fails every survivor") {
  for (const char* transport : {"tcp", "shm"}) {
    INFO("transport ", transport);
    const std::string name = std::string("kill-") + transport;
    constexpr std::size_t kCount = 8 << 20;
    // rank 0 is this process (it hosts the store); ranks 1 and 2 are forked; rank 2 is killed.
    auto rank_body = [&](int rank, int port) -> int {
      transport::TcpStore store("127.0.0.1", port, core::Deadline::after(30s));
      CommOptions options;
      options.name = name;
      options.timeout = 20000ms;
      auto comm = Communicator::create(store, mesh_options(rank, 3, transport, "m"), options,
                                       core::Deadline::after(30s));
      std::vector<float> data(kCount, 1.0f);
      for (int i = 0; i < 1000; ++i) {  // bounded: runs until rank 2 dies
        const std::string e = error_of(
            comm->all_reduce(data.data(), data.data(), kCount, DType::f32, ReduceOp::min), 30s);
        if (!e.empty()) {
          std::fprintf(stderr, "rank %d saw: %s\n", rank, e.c_str());
          return e.find("rank 2") != std::string::npos ? 0 : 7;
        }
      }
      return 8;
    };
    ForkedPeer one = fork_peer([&](int port) { return rank_body(1, port); });
    // the second child learns the same store port through its own pipe
    int pipefd[2];
    REQUIRE(::pipe(pipefd) == 0);
    const pid_t victim = ::fork();
    if (victim == 0) {
      ::close(pipefd[1]);
      int port = 0;
      int status = 4;
      if (::read(pipefd[0], &port, sizeof port) == static_cast<ssize_t>(sizeof port)) {
        try {
          status = rank_body(2, port);
        } catch (...) {
          status = 5;
        }
      }
      ::_exit(status);
    }
    ::close(pipefd[0]);
    REQUIRE(::write(pipefd[1], &one.port, sizeof one.port) ==
            static_cast<ssize_t>(sizeof one.port));
    ::close(pipefd[1]);

    transport::TcpStore store("127.0.0.1", one.port, core::Deadline::after(30s));
    CommOptions options;
    options.name = name;
    options.timeout = 20000ms;
    auto comm = Communicator::create(store, mesh_options(0, 3, transport, "m"), options,
                                     core::Deadline::after(30s));
    std::vector<float> data(kCount, 1.0f);
    comm->all_reduce(data.data(), data.data(), kCount, DType::f32, ReduceOp::min)
        ->wait(core::Deadline::after(60s));
    auto running = comm->all_reduce(data.data(), data.data(), kCount, DType::f32, ReduceOp::min);
    std::this_thread::sleep_for(5ms);
    REQUIRE(::kill(victim, SIGKILL) == 0);
    const auto start = std::chrono::steady_clock::now();
    std::string error = error_of(running, 30s);
    for (int i = 0; i < 100 && error.empty(); ++i) {  // the killed op may have finished first
      error = error_of(
          comm->all_reduce(data.data(), data.data(), kCount, DType::f32, ReduceOp::min), 30s);
    }
    INFO(error);
    CHECK(error.find("rank 0: all_reduce seq") != std::string::npos);
    CHECK(error.find("rank 2") != std::string::npos);
    CHECK(error.find("bytes") != std::string::npos);
    CHECK(std::chrono::steady_clock::now() - start < 20s);
    CHECK(wait_child(victim) == -SIGKILL);
    CHECK(wait_child(one.pid) == 0);
  }
}
