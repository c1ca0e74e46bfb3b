// Shared harness of the nccl-tests-style collective benchmarks (all_reduce_perf,
// all_gather_perf, reduce_scatter_perf, broadcast_perf): nccl-tests' flags and table, ranks as
// processes (spawned with -np, or one rank under a launcher), timing (mean per op of the slowest
// rank) and exact checking of every result, on host or device buffers; counts are elements,
// sizes bytes. A peer program (peer_engine.h) runs a peer library's collectives in it.
#pragma once

#include <sys/types.h>

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "collectives/communicator.h"
#include "distributed/launch/orphan_sweeper.h"
#include "transport/store.h"
#include "transport/tcp_store.h"

namespace ringlet::bench {

enum class Collective { all_reduce, all_gather, reduce_scatter, broadcast };

struct PeerProgram;  // bench/peer_engine.h

// The whole program: parses argv, sets up the ranks, runs, prints (rank 0), and returns the exit
// status (non-zero on wrong results, bad flags or any error). Only this function's caller exits.
// With `peer`, the timed collectives are the peer library's (a peer program's main).
int collective_bench_main(Collective coll, int argc, char** argv,
                          const PeerProgram* peer = nullptr);

// ---- internals shared by the harness's source files ----

struct BenchOptions {
  std::size_t min_bytes = 32u << 20;  // nccl-tests' defaults
  std::size_t max_bytes = 32u << 20;
  std::size_t step_bytes = 1u << 20;
  std::size_t step_factor = 1;
  int ngpus = 1;
  int iters = 20;
  int warmup = 5;
  int check = 1;
  int blocking = 0;  // -z 1: wait for each op before issuing the next
  int average = 3;   // -a: 0 rank 0, 1 mean, 2 min, 3 max over ranks (nccl-tests' default is 1)
  int timeout_s = 0;
  double min_time_s = 0;     // --min-time: grow iters until a timed loop lasts this long
  double warmup_time_s = 0;  // --warmup-time: the smallest size's op for this long first
  bool corrupt = false;      // --corrupt: negative control, spoils one result element per check
  std::vector<core::DType> types{core::DType::f32};
  std::vector<collectives::ReduceOp> ops{collectives::ReduceOp::sum};
  int root = 0;
  std::string transport;  // "tcp", "shm", "auto"; empty = RINGLET_TRANSPORT or auto
  // Device buffers (-g 1 or --device): "cpu" = host buffers; "emu" / "cuda" (device local
  // rank % count). link: how device ops travel: "auto", "ipc" (-t ipc), "staged" (-t tcp/shm).
  std::string device = "cpu";
  bool gpu_flag = false;
  std::string link = "auto";
  int np = 0;            // -np: ranks to spawn (0 = not given)
  bool threads = false;  // --threads: the -np ranks as threads of this process
  int child_rank = -1;   // set on ranks spawned by -np
  int store_port = 0;
  int parent_pid = 0;             // rank 0's pid, on ranks spawned by -np
  std::vector<std::string> args;  // argv[1..], forwarded to spawned ranks
  std::string model;              // --model: a profile file or "default"; empty: no column
};

BenchOptions parse_bench_options(const std::string& program, int argc, char** argv);
std::string usage(const std::string& program);

// One rank's view of the job: the store it rendezvoused through and where it lives.
struct RankSetup {
  int rank = 0;
  int world_size = 1;
  std::string store_host = "127.0.0.1";
  std::unique_ptr<transport::TcpStoreServer> server;  // -np rank 0 hosts the store
  std::unique_ptr<transport::Store> store;
  std::vector<pid_t> children;  // -np rank 0: the ranks it spawned (index r-1 = rank r)
  // -np rank 0: removes what rank 0 and its ranks leave in /dev/shm should rank 0 be killed.
  std::unique_ptr<distributed::OrphanSweeper> sweeper;
};

// -np N (or no launcher environment: N = 1): rank 0 hosts the store on 127.0.0.1 and spawns
// ranks 1..N-1 as /proc/self/exe; a spawned rank connects back. With RANK/WORLD_SIZE/... (a
// launcher) and no -np: discover() + open_store().
RankSetup setup_ranks(const BenchOptions& options, const char* program);

// One rank's sweep over every (type, op, size) on `comm` (ringlet's, or `peer`'s engine);
// rank 0 prints the table. Returns the exit status (collective_bench.cpp).
int run_all(Collective coll, const std::string& program, const BenchOptions& o,
            collectives::Communicator& comm, transport::Store& store, const PeerProgram* peer);

// Watches the spawned ranks from a thread: the first one that dies with a non-zero status or a
// signal is reported through on_failure (once) with a message naming it.
class ChildWatcher {
 public:
  ChildWatcher(std::vector<pid_t> children, std::function<void(const std::string&)> on_failure);
  ~ChildWatcher();  // stops watching; kills children still running
  // Waits up to `seconds` for every child to exit; returns "" or what went wrong.
  std::string wait_all(double seconds);
  std::string failure() const;
  // The failure, waiting up to `seconds` for one: rank 0 failing in a step that noticed a dead
  // rank by itself (shm's watch on a peer's process) names the death as the watcher saw it. A
  // rank killed by a signal is named before ranks that exited non-zero after it.
  std::string failure_within(double seconds) const;

 private:
  struct State;
  std::shared_ptr<State> state_;
};

// The communicator a watcher thread may abort, published only while it is alive.
class LiveComm {
 public:
  class Publish {
   public:
    Publish(LiveComm& live, collectives::Communicator& comm) : live_(live) { live_.set(&comm); }
    ~Publish() { live_.set(nullptr); }
    Publish(const Publish&) = delete;
    Publish& operator=(const Publish&) = delete;

   private:
    LiveComm& live_;
  };
  // Aborts the communicator if one is published; returns whether one was.
  bool abort(const std::string& why) {
    std::lock_guard lock(mutex_);
    if (comm_ != nullptr) comm_->abort(why);
    return comm_ != nullptr;
  }

 private:
  void set(collectives::Communicator* comm) {
    std::lock_guard lock(mutex_);
    comm_ = comm;
  }
  std::mutex mutex_;
  collectives::Communicator* comm_ = nullptr;
};

// ---- data patterns: integer-valued so that every dtype x op result is exact ----

struct Pattern {
  Collective coll;
  collectives::ReduceOp op;
  core::DType dtype;
  int nranks;
  int root;
};

// Fills data[0, count) with what `rank` contributes at global element indices first..first+count.
void fill_input(const Pattern& p, int rank, void* data, std::size_t first, std::size_t count);
// Fills data[0, count) with a value no result ever has (so unwritten elements are wrong).
void fill_sentinel(const Pattern& p, void* data, std::size_t count);
// Counts elements of data[0, count) that differ from the expected result at global element
// indices first..first+count (all_gather: index k is element k % block of rank k / block).
std::int64_t count_wrong(const Pattern& p, const void* data, std::size_t first, std::size_t count,
                         std::size_t block);

}  // namespace ringlet::bench
