// Ping-pongs over real meshes, reduction and copy rates, and the least-squares fit.
#include "model/fit.h"

#include <algorithm>
#include <chrono>
#include <cstring>
#include <ctime>
#include <exception>
#include <sstream>
#include <thread>

#include "collectives/reduce_kernels.h"
#include "core/error.h"
#include "transport/mesh.h"
#include "transport/tcp_store.h"

namespace ringlet::model {
namespace {

using Clock = std::chrono::steady_clock;
using namespace std::chrono_literals;

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0 : v[v.size() / 2];
}

double seconds_since(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

const std::vector<std::size_t> kSizes{8, 4 << 10, 64 << 10, 256 << 10, 1 << 20, 4 << 20, 16 << 20};

// Ping-pongs enough to move about `budget` bytes each way (5 .. 400 of them); rank 0's round
// trips, halved.
std::vector<double> ping_pong(int rank, transport::Connection& peer, std::size_t bytes,
                              std::size_t budget) {
  const std::size_t rounds =
      std::clamp<std::size_t>(budget / std::max<std::size_t>(bytes, 1), 5, 400);
  std::vector<char> buffer(bytes);
  std::vector<double> one_way;
  const auto deadline = core::Deadline::after(60s);
  for (std::size_t i = 0; i < rounds + 2; ++i) {  // the first two warm up
    const auto start = Clock::now();
    if (rank == 0) {
      peer.send(buffer.data(), bytes)->wait(deadline);
      peer.recv(buffer.data(), bytes)->wait(deadline);
    } else {
      peer.recv(buffer.data(), bytes)->wait(deadline);
      peer.send(buffer.data(), bytes)->wait(deadline);
    }
    if (i >= 2) one_way.push_back(seconds_since(start) / 2);
  }
  return one_way;
}

// Latency: the smallest size's time; bandwidth: the slope over the sizes from 256 KiB.
LinkCost fit_link(const std::vector<Sample>& samples) {
  double n = 0, sx = 0, sy = 0, sxx = 0, sxy = 0;
  for (const Sample& s : samples) {
    if (s.bytes < (256u << 10)) continue;
    const double x = static_cast<double>(s.bytes), y = s.one_way_us * 1e-6;
    n += 1;
    sx += x;
    sy += y;
    sxx += x * x;
    sxy += x * y;
  }
  const double slope = (n * sxy - sx * sy) / (n * sxx - sx * sx);
  RINGLET_CHECK(slope > 0, Error, "model fit: the one-way time did not grow with the size (", slope,
                " s per byte): the machine was too busy to measure");
  return {samples.front().one_way_us, 1 / slope / 1e9};
}

LinkFit measure_link_once(const std::string& transport, bool quick) {
  transport::TcpStoreServer server("127.0.0.1", 0);
  LinkFit fit{transport, {}, {}};
  std::vector<std::vector<double>> times(kSizes.size());
  std::exception_ptr errors[2];
  const auto rank_body = [&](int rank) {
    try {
      transport::TcpStore store("127.0.0.1", server.port(), core::Deadline::after(30s));
      transport::MeshOptions o;
      o.rank = rank;
      o.world_size = 2;
      o.transport = transport;
      o.prefix = "fit-" + transport;
      o.store_host = "127.0.0.1";
      auto mesh = transport::Mesh::connect(store, o, core::Deadline::after(30s));
      for (std::size_t k = 0; k < kSizes.size(); ++k) {
        auto t = ping_pong(rank, mesh->peer(1 - rank), kSizes[k],
                           quick ? (std::size_t{1} << 20) : (std::size_t{256} << 20));
        if (rank == 0) times[k] = std::move(t);
      }
      transport::store_barrier(store, o.prefix + "/end", 2, core::Deadline::after(60s));
    } catch (...) {
      errors[rank] = std::current_exception();
    }
  };
  std::thread other(rank_body, 1);
  rank_body(0);
  other.join();
  for (const auto& e : errors) {
    if (e) std::rethrow_exception(e);
  }
  for (std::size_t k = 0; k < kSizes.size(); ++k) {
    fit.samples.push_back({kSizes[k], median(times[k]) * 1e6});
  }
  return fit;
}

// The link measured `sittings` times, each size's fastest median kept: two ranks sharing two
// cores sometimes sleep between messages, which makes a whole sitting slow.
LinkFit measure_link(const std::string& transport, int sittings, bool quick) {
  LinkFit best = measure_link_once(transport, quick);
  for (int i = 1; i < sittings; ++i) {
    const LinkFit again = measure_link_once(transport, quick);
    for (std::size_t k = 0; k < best.samples.size(); ++k) {
      best.samples[k].one_way_us =
          std::min(best.samples[k].one_way_us, again.samples[k].one_way_us);
    }
  }
  best.cost = fit_link(best.samples);
  return best;
}

// Bytes per second of `step` over 16 MiB outputs: the median of several runs.
template <class Step>
double rate_GBps(std::size_t bytes, int runs, Step step) {
  std::vector<double> t;
  for (int i = 0; i < runs + 1; ++i) {
    const auto start = Clock::now();
    step();
    if (i > 0) t.push_back(seconds_since(start));
  }
  return static_cast<double>(bytes) / median(t) / 1e9;
}

}  // namespace

MachineFit fit_machine(bool quick) {
  MachineFit fit;
  fit.shm = measure_link("shm", quick ? 1 : 3, quick);
  fit.tcp = measure_link("tcp", quick ? 1 : 3, quick);
  const std::size_t count = std::size_t{4} << 20, bytes = count * sizeof(float);
  std::vector<float> a(count, 1.0f), b(count, 2.0f), out(count);
  const int runs = quick ? 2 : 9;
  fit.reduce_GBps = rate_GBps(bytes, runs, [&] {
    collectives::reduce_pair(out.data(), a.data(), b.data(), count, collectives::DType::f32,
                             collectives::ReduceOp::sum);
  });
  fit.copy_GBps = rate_GBps(bytes, runs, [&] { std::memcpy(out.data(), a.data(), bytes); });
  Profile& p = fit.profile;
  p = default_profile();
  std::time_t now = std::time(nullptr);
  char date[32];
  std::strftime(date, sizeof date, "%Y-%m-%d %H:%M", std::localtime(&now));
  p.name = "this machine: shm within a host, tcp loopback between hosts";
  p.source = std::string("ringlet model fit, ") + date;
  p.intra = fit.shm.cost;
  p.inter = fit.tcp.cost;
  p.nic_GBps = fit.tcp.cost.bandwidth_GBps;
  p.nics_per_host = 1;
  p.intra.copies = p.inter.copies = true;  // shm and tcp: the ranks' CPUs copy every byte
  p.cores_per_host = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  p.reduce_GBps = fit.reduce_GBps;
  p.copy_GBps = fit.copy_GBps;
  return fit;
}

std::string fit_report(const MachineFit& fit) {
  std::ostringstream out;
  out << "# one-way time of a message (median of ping-pongs between two ranks), us\n";
  out << "#      bytes        shm        tcp\n";
  for (std::size_t k = 0; k < fit.shm.samples.size(); ++k) {
    char line[96];
    std::snprintf(line, sizeof line, " %10zu %10.2f %10.2f\n", fit.shm.samples[k].bytes,
                  fit.shm.samples[k].one_way_us, fit.tcp.samples[k].one_way_us);
    out << line;
  }
  char line[256];
  std::snprintf(line, sizeof line,
                "# shm: %.2f us + bytes / %.2f GB/s; tcp: %.2f us + bytes / %.2f GB/s\n"
                "# reduction (float32 sum, one thread): %.2f GB/s; copy: %.2f GB/s\n",
                fit.shm.cost.latency_us, fit.shm.cost.bandwidth_GBps, fit.tcp.cost.latency_us,
                fit.tcp.cost.bandwidth_GBps, fit.reduce_GBps, fit.copy_GBps);
  out << line;
  return out.str();
}

}  // namespace ringlet::model
