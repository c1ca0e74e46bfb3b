#include "model/rank_threads.h"

#include <pthread.h>
#include <sched.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <exception>
#include <thread>
#include <vector>

#include "core/deadline.h"
#include "core/error.h"
#include "transport/tcp_store.h"

namespace ringlet::model {

using namespace std::chrono_literals;

void on_threads(int ranks, const std::function<void(int rank)>& body) {
  std::vector<std::exception_ptr> errors(static_cast<std::size_t>(ranks));
  std::vector<std::thread> threads;
  for (int rank = 0; rank < ranks; ++rank) {
    threads.emplace_back([&, rank] {
      try {
        body(rank);
      } catch (...) {
        errors[static_cast<std::size_t>(rank)] = std::current_exception();
      }
    });
  }
  for (auto& thread : threads) thread.join();
  for (const auto& e : errors) {
    if (e) std::rethrow_exception(e);
  }
}

void stay_on_cpu(int cpu) {
  cpu_set_t one;
  CPU_ZERO(&one);
  CPU_SET(cpu, &one);
  RINGLET_CHECK(pthread_setaffinity_np(pthread_self(), sizeof one, &one) == 0, Error,
                "model fit: cannot keep a thread on CPU ", cpu);
}

std::pair<int, int> two_cpus() {
  cpu_set_t allowed;
  int found[2] = {-1, -1};
  if (sched_getaffinity(0, sizeof allowed, &allowed) != 0) return {-1, -1};
  for (int cpu = 0, n = 0; cpu < CPU_SETSIZE && n < 2; ++cpu) {
    if (CPU_ISSET(cpu, &allowed)) found[n++] = cpu;
  }
  return found[1] < 0 ? std::pair{-1, -1} : std::pair{found[0], found[1]};
}

void on_ranks(const std::string& transport, int ranks, bool one_cpu,
              const std::function<void(int rank, transport::Mesh& mesh)>& body) {
  const std::pair<int, int> cpus = two_cpus();
  transport::TcpStoreServer server("127.0.0.1", 0);
  std::atomic<int> cpu{-1};
  on_threads(ranks, [&](int rank) {
    if (one_cpu && rank == 0) {  // rank 0 stays where it is, the others join it
      cpu = std::max(0, sched_getcpu());
      cpu.notify_all();
    }
    if (one_cpu) {
      cpu.wait(-1);
      stay_on_cpu(cpu.load());
    }
    transport::TcpStore store("127.0.0.1", server.port(), core::Deadline::after(30s));
    transport::MeshOptions o;
    o.rank = rank;
    o.world_size = ranks;
    o.transport = transport;
    o.prefix = "fit-" + transport + "-" + std::to_string(ranks);
    o.store_host = "127.0.0.1";
    auto mesh = transport::Mesh::connect(store, o, core::Deadline::after(30s));
    if (!one_cpu && cpus.first >= 0) stay_on_cpu(rank % 2 == 0 ? cpus.first : cpus.second);
    body(rank, *mesh);
    transport::store_barrier(store, o.prefix + "/end", ranks, core::Deadline::after(60s));
  });
}

}  // namespace ringlet::model
