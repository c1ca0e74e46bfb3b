// Two ranks' communicators timed against the simulation of the same ops.
#include "model/op_costs.h"

#include <algorithm>
#include <chrono>
#include <vector>

#include "collectives/communicator.h"
#include "model/rank_threads.h"
#include "model/simulate.h"
#include "transport/tcp_store.h"

namespace ringlet::model {
namespace {

using Clock = std::chrono::steady_clock;
using namespace std::chrono_literals;

constexpr std::size_t kCount = 2;  // float32 elements: 8 bytes
// Ops issued before the first wait, as all_reduce_perf keeps them in flight (an op's time is
// then the time between ops, as there).
constexpr int kBatch = 32;

// Rank 0's time per 8-byte all-reduce by `algorithm`, seconds: two ranks as threads, each with a
// communicator over shm, `rounds` of kBatch ops timed after as many to warm up, the median.
double measured_seconds(collectives::Algorithm algorithm, int rounds) {
  transport::TcpStoreServer server("127.0.0.1", 0);
  const std::string name = collectives::algorithm_name(algorithm);
  std::vector<double> times;
  on_two_threads([&](int rank) {
    transport::TcpStore store("127.0.0.1", server.port(), core::Deadline::after(30s));
    transport::MeshOptions mesh;
    mesh.rank = rank;
    mesh.world_size = 2;
    mesh.transport = "shm";
    mesh.prefix = "fit-op-" + name;
    mesh.store_host = "127.0.0.1";
    collectives::CommOptions options;
    options.algo = name;
    options.name = "fit-op-" + name;
    options.timeout = 30s;
    auto comm = collectives::Communicator::create(store, mesh, options, core::Deadline::after(30s));
    std::vector<float> data(kCount, 1.0f);
    for (int round = 0; round < 2 * rounds; ++round) {
      const auto start = Clock::now();
      std::vector<collectives::WorkPtr> issued;
      for (int k = 0; k < kBatch; ++k) {
        issued.push_back(comm->all_reduce(data.data(), data.data(), kCount, collectives::DType::f32,
                                          collectives::ReduceOp::sum));
      }
      for (auto it = issued.rbegin(); it != issued.rend(); ++it) (*it)->wait();
      if (rank == 0 && round >= rounds) {
        times.push_back(std::chrono::duration<double>(Clock::now() - start).count() / kBatch);
      }
    }
  });
  std::sort(times.begin(), times.end());
  return times[times.size() / 2];
}

}  // namespace

std::map<std::string, double> measure_op_us(const Profile& profile, int ops, int sittings) {
  Profile bare = profile;
  bare.op_us.clear();
  SimCase op;
  op.shape.ranks = 2;
  op.bytes = kCount * sizeof(float);
  std::map<std::string, double> op_us;
  for (const collectives::Algorithm algorithm :
       simulated_algorithms(Collective::all_reduce, op.shape, bare)) {
    op.algorithm = algorithm;
    double fastest = measured_seconds(algorithm, std::max(ops / kBatch, 1));
    for (int k = 1; k < sittings; ++k) {
      fastest = std::min(fastest, measured_seconds(algorithm, std::max(ops / kBatch, 1)));
    }
    const double beyond = fastest - simulate(op, bare).seconds;
    op_us[collectives::algorithm_name(algorithm)] = std::max(0.0, beyond * 1e6);
  }
  return op_us;
}

}  // namespace ringlet::model
