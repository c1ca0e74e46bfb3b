// The benchmarks' main: options, the ranks (spawned processes, a launcher's, or --threads), and
// each rank's run of run_all (collective_bench.cpp) over its communicator.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <thread>

#include "bench/collective_bench.h"
#include "bench/peer_engine.h"
#include "core/error.h"
#include "core/isa.h"
#include "transport/job_footprint.h"
#include "transport/rendezvous.h"

namespace ringlet::bench {
namespace {

using namespace std::chrono_literals;
using collectives::Communicator;

const char* program_name(Collective c) {
  switch (c) {
    case Collective::all_reduce: return "all_reduce_perf";
    case Collective::all_gather: return "all_gather_perf";
    case Collective::reduce_scatter: return "reduce_scatter_perf";
    case Collective::broadcast: return "broadcast_perf";
  }
  return "collective_perf";
}

// One rank's whole run over `setup`'s store: its communicator, every size, and the ends.
int run_rank(Collective coll, const std::string& program, const BenchOptions& o,
             const RankSetup& setup, LiveComm& live, const PeerProgram* peer) {
  const auto deadline = core::Deadline::after(120s);
  transport::MeshOptions mesh;
  mesh.rank = setup.rank;
  mesh.world_size = setup.world_size;
  mesh.prefix = "bench/mesh";
  mesh.job_token = transport::job_token(*setup.store, setup.rank, deadline);
  mesh.transport = o.transport;
  mesh.store_host = setup.store_host;
  collectives::CommOptions options;
  options.name = "bench/comm";
  if (o.timeout_s > 0) options.timeout = std::chrono::seconds(o.timeout_s);
  auto comm = Communicator::create(*setup.store, mesh, options, deadline);
  LiveComm::Publish publish(live, *comm);  // withdrawn before comm is destroyed
  const int status = run_all(coll, program, o, *comm, *setup.store, peer);
  comm->barrier()->wait(core::Deadline::after(comm->timeout()));
  // Nobody tears down its connections until every rank is past the last collective.
  transport::store_barrier(*setup.store, "bench/done", setup.world_size,
                           core::Deadline::after(comm->timeout()));
  return status;
}

// --threads: the -np ranks as threads of this process around one store; a rank that fails
// says so, and its closed connections fail the others' ops at once.
int run_as_threads(Collective coll, const std::string& program, const BenchOptions& o) {
  transport::TcpStoreServer server("127.0.0.1", 0);
  std::vector<int> status(static_cast<std::size_t>(o.np), 1);
  std::vector<std::thread> threads;
  for (int r = 0; r < o.np; ++r) {
    threads.emplace_back([&, r] {
      try {
        RankSetup setup;
        setup.rank = r;
        setup.world_size = o.np;
        setup.store = std::make_unique<transport::TcpStore>("127.0.0.1", server.port(),
                                                            core::Deadline::after(60s));
        LiveComm live;
        status[r] = run_rank(coll, program, o, setup, live, nullptr);
      } catch (const std::exception& e) {
        std::fflush(stdout);
        std::fprintf(stderr, "%s (rank %d, a thread): %s\n", program.c_str(), r, e.what());
      }
    });
  }
  for (auto& t : threads) t.join();
  return *std::max_element(status.begin(), status.end());
}

}  // namespace

int collective_bench_main(Collective coll, int argc, char** argv, const PeerProgram* peer) {
  const std::string program = (peer ? peer->prefix : std::string()) + program_name(coll);
  BenchOptions o;
  try {
    o = parse_bench_options(program, argc, argv);
    core::active_isa();  // a bad RINGLET_ISA is a usage error too, before any rank starts
    RINGLET_CHECK(!o.threads || peer == nullptr, ValueError,
                  "--threads runs ringlet's ranks; the peer programs run one rank a process");
  } catch (const std::exception& e) {  // a usage error: exit 2, as every program does
    std::fprintf(stderr, "%s: %s\n", program.c_str(), e.what());
    return 2;
  }
  int rank = 0;
  try {
    if (o.np < 0) {
      std::printf("%s", usage(program).c_str());
      return 0;
    }
    if (o.np > 1 && o.child_rank < 0) {
      // Each rank holds its send, receive and check buffers of the largest size, and a runtime.
      transport::check_local_job_fits({o.np,
                                       3 * static_cast<std::uint64_t>(o.max_bytes) + (64ull << 20),
                                       core::str(program, " -np ", o.np, " -e ", o.max_bytes)});
    }
    if (o.threads) return run_as_threads(coll, program, o);
    rank = o.child_rank > 0 ? o.child_rank : 0;
    RankSetup setup = setup_ranks(o, program.c_str());
    rank = setup.rank;

    // A spawned rank that dies aborts the communicator and stops the store (rank 0 may be in a
    // collective or in a store wait: set-up, the final barrier), so rank 0 fails at once naming
    // that rank instead of waiting for a timeout.
    LiveComm live;
    std::unique_ptr<ChildWatcher> watcher;
    if (!setup.children.empty()) {
      watcher = std::make_unique<ChildWatcher>(setup.children, [&](const std::string& why) {
        live.abort(why);
        if (setup.server) setup.server->stop();
      });
    }
    int status = 0;
    try {
      status = run_rank(coll, program, o, setup, live, peer);
    } catch (...) {
      if (watcher) {
        const std::string death = watcher->failure_within(1.0);
        if (!death.empty())
          std::fprintf(stderr, "%s (rank 0): %s\n", program.c_str(), death.c_str());
        // The other ranks are failing too: let them say why before this rank's exit ends them
        // (their parent-death signal cuts a report short).
        watcher->wait_all(3.0);
      }
      throw;
    }
    if (watcher) {
      const std::string problem = watcher->wait_all(60);
      RINGLET_CHECK(problem.empty(), Error, problem);
    }
    setup.store.reset();
    if (setup.server) setup.server->wait_until_idle(core::Deadline::after(10s));
    // Wrong results fail the job once, through rank 0's status; a spawned rank exiting non-zero
    // would read as a crash to rank 0's watcher.
    return o.child_rank > 0 ? 0 : status;
  } catch (const std::exception& e) {
    std::fflush(stdout);
    std::fprintf(stderr, "%s (rank %d): %s\n", program.c_str(), rank, e.what());
    return 1;
  }
}

}  // namespace ringlet::bench
