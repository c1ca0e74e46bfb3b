// p2p_perf: point-to-point latency (ping-pong, 4 B .. 4 KiB) and streaming bandwidth
// (64 KiB .. 64 MiB) between two processes, per transport (tcp with 1..N sockets per peer,
// shm), next to iperf3's single-stream loopback figure measured in the same run. Every
// transfer is checked (the receiver verifies a pattern). Reported: the median of --reps runs.
// One JSON line per result: transport, test, bytes, us, gbps (GB/s = 1e9 B/s), nsocks.
//
// usage: p2p_perf [--transports tcp,shm,rdma] [--nsocks 1,2,4] [--reps 5] [--no-iperf]
// The program spawns rank 1 itself (the same binary with --rank 1 --store-port P).
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <iostream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "bench/program_main.h"
#include "core/env.h"
#include "core/error.h"
#include "transport/mesh.h"
#include "transport/tcp_store.h"

extern char** environ;

using namespace ringlet;
using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

namespace {

struct Config {
  std::string transport;
  int nsocks;
};

struct Options {
  std::vector<std::string> transports{"tcp", "shm"};
  std::vector<int> nsocks{1, 2, 4};
  int reps = 5;
  bool iperf = true;
  int rank = 0;
  int store_port = 0;
};

std::vector<std::string> split(const std::string& text) {
  std::vector<std::string> out;
  std::stringstream in(text);
  std::string item;
  while (std::getline(in, item, ',')) out.push_back(item);
  return out;
}

Options parse(int argc, char** argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    auto value = [&]() -> std::string {
      RINGLET_CHECK(i + 1 < argc, ValueError, arg, " needs a value");
      return argv[++i];
    };
    if (arg == "--transports") {
      o.transports = split(value());
    } else if (arg == "--nsocks") {
      o.nsocks.clear();
      for (const auto& n : split(value()))
        o.nsocks.push_back(static_cast<int>(core::parse_int(n, "--nsocks")));
    } else if (arg == "--reps") {
      o.reps = static_cast<int>(core::parse_int(value(), "--reps"));
    } else if (arg == "--no-iperf") {
      o.iperf = false;
    } else if (arg == "--rank") {
      o.rank = static_cast<int>(core::parse_int(value(), "--rank"));
    } else if (arg == "--store-port") {
      o.store_port = static_cast<int>(core::parse_int(value(), "--store-port"));
    } else {
      RINGLET_THROW(ValueError, "unknown flag '", arg, "'");
    }
  }
  for (const auto& t : o.transports) {
    RINGLET_CHECK(t == "tcp" || t == "shm" || t == "rdma", ValueError, "unknown transport '", t,
                  "' (tcp, shm, rdma)");
  }
  return o;
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

void fill(std::vector<unsigned char>& buf, unsigned seed) {
  for (std::size_t i = 0; i < buf.size(); ++i) buf[i] = static_cast<unsigned char>(i * 7 + seed);
}

bool verify(const std::vector<unsigned char>& buf, std::size_t n, unsigned seed) {
  for (std::size_t i = 0; i < n; i += 4093) {
    if (buf[i] != static_cast<unsigned char>(i * 7 + seed)) return false;
  }
  return n == 0 || buf[n - 1] == static_cast<unsigned char>((n - 1) * 7 + seed);
}

const auto kDeadline = 120s;

// Half the round trip of a ping-pong, in microseconds (median over reps).
double latency_us(transport::Connection& c, int rank, std::size_t bytes, int reps) {
  std::vector<unsigned char> out(bytes), in(bytes);
  fill(out, 1);
  const int iters = 2000;
  std::vector<double> samples;
  for (int r = 0; r < reps + 1; ++r) {  // the first run warms up
    const auto start = Clock::now();
    for (int i = 0; i < iters; ++i) {
      const auto d = core::Deadline::after(kDeadline);
      if (rank == 0) {
        auto rr = c.recv(in.data(), bytes);
        c.send(out.data(), bytes)->wait(d);
        rr->wait(d);
      } else {
        c.recv(in.data(), bytes)->wait(d);
        c.send(out.data(), bytes)->wait(d);
      }
    }
    const double us = std::chrono::duration<double, std::micro>(Clock::now() - start).count();
    RINGLET_CHECK(verify(in, bytes, 1), Error, "p2p_perf: ping-pong data corrupted");
    if (r > 0) samples.push_back(us / iters / 2);
  }
  return median(samples);
}

// Streaming: rank 0 sends `count` messages (two in flight), rank 1 receives and acknowledges
// the last one; returns GB/s (median over reps).
double bandwidth_gbps(transport::Connection& c, int rank, std::size_t bytes, int reps) {
  const std::size_t total = std::size_t{512} << 20;
  const int count = static_cast<int>(std::max<std::size_t>(8, total / bytes));
  std::vector<unsigned char> a(bytes), b(bytes);
  fill(a, 3);
  fill(b, 3);
  unsigned char ack = 0;
  std::vector<double> samples;
  for (int r = 0; r < reps + 1; ++r) {
    const auto d = core::Deadline::after(kDeadline);
    const auto start = Clock::now();
    if (rank == 0) {
      transport::RequestPtr prev;
      for (int i = 0; i < count; ++i) {
        auto s = c.send((i % 2 ? a : b).data(), bytes);
        if (prev) prev->wait(d);
        prev = s;
      }
      prev->wait(d);
      c.recv(&ack, 1)->wait(d);
    } else {
      transport::RequestPtr prev;
      for (int i = 0; i < count; ++i) {
        auto q = c.recv((i % 2 ? a : b).data(), bytes);
        if (prev) prev->wait(d);
        prev = q;
      }
      prev->wait(d);
      RINGLET_CHECK(verify(a, bytes, 3) && verify(b, bytes, 3), Error,
                    "p2p_perf: streamed data corrupted");
      c.send(&ack, 1)->wait(d);
    }
    const double s = std::chrono::duration<double>(Clock::now() - start).count();
    if (r > 0) samples.push_back(static_cast<double>(bytes) * count / s / 1e9);
  }
  return median(samples);
}

// iperf3's single-stream loopback bandwidth in GB/s, or a negative value when unavailable.
double iperf3_gbps() {
  if (std::system("command -v iperf3 >/dev/null 2>&1") != 0) return -1;
  const int port = 5201 + static_cast<int>(::getpid() % 1000);
  const std::string server =
      "iperf3 -s -1 -B 127.0.0.1 -p " + std::to_string(port) + " >/dev/null 2>&1 &";
  if (std::system(server.c_str()) != 0) return -1;
  std::this_thread::sleep_for(500ms);
  const std::string client =
      "iperf3 -c 127.0.0.1 -p " + std::to_string(port) + " -t 3 -P 1 -J 2>/dev/null";
  FILE* pipe = ::popen(client.c_str(), "r");
  if (pipe == nullptr) return -1;
  std::string text;
  char buffer[4096];
  while (std::fgets(buffer, sizeof buffer, pipe) != nullptr) text += buffer;
  ::pclose(pipe);
  try {
    const auto json = nlohmann::json::parse(text);
    return json["end"]["sum_received"]["bits_per_second"].get<double>() / 8 / 1e9;
  } catch (const std::exception&) {
    return -1;
  }
}

void emit(const std::string& transport, int nsocks, const std::string& test, std::size_t bytes,
          double us, double gbps) {
  nlohmann::json line{{"bench", "p2p_perf"}, {"transport", transport}, {"nsocks", nsocks},
                      {"test", test},        {"bytes", bytes},         {"us", us},
                      {"gbps", gbps}};
  std::cout << line.dump() << std::endl;
}

// Rank 1: this same binary (/proc/self/exe) with the store's port and the same settings.
pid_t spawn_rank1(const Options& o, int store_port) {
  std::string ts, ns;
  for (const auto& t : o.transports) ts += (ts.empty() ? "" : ",") + t;
  for (int n : o.nsocks) ns += (ns.empty() ? "" : ",") + std::to_string(n);
  std::vector<std::string> args = {"/proc/self/exe",
                                   "--rank",
                                   "1",
                                   "--store-port",
                                   std::to_string(store_port),
                                   "--reps",
                                   std::to_string(o.reps),
                                   "--transports",
                                   ts,
                                   "--nsocks",
                                   ns};
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  pid_t child = -1;
  RINGLET_CHECK(
      ::posix_spawn(&child, "/proc/self/exe", nullptr, nullptr, argv.data(), environ) == 0, Error,
      "p2p_perf: cannot start rank 1");
  return child;
}

// Latency, then bandwidth, over a fresh mesh of configuration number k; rank 0 reports.
void measure_config(transport::Store& store, const Options& o, const Config& cfg, std::size_t k) {
  static const std::vector<std::size_t> kLatencySizes{4, 64, 512, 4096};
  static const std::vector<std::size_t> kBandwidthSizes{64 << 10, 1 << 20, 16 << 20, 64 << 20};
  transport::MeshOptions mo;
  mo.rank = o.rank;
  mo.world_size = 2;
  mo.prefix = "p2p/" + std::to_string(k);
  mo.job_token = 42;
  mo.transport = cfg.transport;
  mo.nsocks = cfg.nsocks;
  mo.store_host = "127.0.0.1";
  auto mesh = transport::Mesh::connect(store, mo, core::Deadline::after(60s));
  auto& c = mesh->peer(1 - o.rank);
  for (auto bytes : kLatencySizes) {
    const double us = latency_us(c, o.rank, bytes, o.reps);
    if (o.rank == 0) {
      std::printf("  %-4s %6d %10s %12zu %9.2f us\n", cfg.transport.c_str(), cfg.nsocks, "latency",
                  bytes, us);
      emit(cfg.transport, cfg.nsocks, "latency", bytes, us, bytes / us / 1e3);
    }
  }
  for (auto bytes : kBandwidthSizes) {
    const double gbps = bandwidth_gbps(c, o.rank, bytes, o.reps);
    if (o.rank == 0) {
      std::printf("  %-4s %6d %10s %12zu %9.2f GB/s\n", cfg.transport.c_str(), cfg.nsocks,
                  "bandwidth", bytes, gbps);
      emit(cfg.transport, cfg.nsocks, "bandwidth", bytes, bytes / gbps / 1e3, gbps);
    }
  }
  transport::store_barrier(store, mo.prefix + "/done", 2, core::Deadline::after(60s));
}

// Rank 0, after the last configuration: rank 1's exit, then iperf3 for comparison.
void finish(const Options& o, pid_t child) {
  int status = 0;
  ::waitpid(child, &status, 0);
  RINGLET_CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0, Error,
                "p2p_perf: rank 1 failed (status ", status, ")");
  if (!o.iperf) return;
  const double gbps = iperf3_gbps();
  if (gbps < 0) {
    std::printf("  iperf3: skipped (not installed: apt-get install iperf3)\n");
  } else {
    std::printf("  %-4s %6d %10s %12s %9.2f GB/s  (iperf3 -P 1, the loopback limit)\n", "iperf3", 1,
                "bandwidth", "stream", gbps);
    emit("iperf3", 1, "bandwidth", 0, 0, gbps);
  }
}

int run(const Options& o, const std::vector<Config>& configs) {
  std::unique_ptr<transport::TcpStoreServer> server;
  int store_port = o.store_port;
  if (o.rank == 0) {
    server = std::make_unique<transport::TcpStoreServer>("127.0.0.1", 0);
    store_port = server->port();
  }
  transport::TcpStore store("127.0.0.1", store_port, core::Deadline::after(30s));
  pid_t child = -1;
  if (o.rank == 0) {
    child = spawn_rank1(o, store_port);
    std::printf("# p2p_perf: 2 processes on one host, median of %d runs\n", o.reps);
    std::printf("# %-4s %6s %10s %12s %12s\n", "tr", "nsocks", "test", "bytes", "result");
  }
  for (std::size_t k = 0; k < configs.size(); ++k) measure_config(store, o, configs[k], k);
  if (o.rank == 0) finish(o, child);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  return ringlet::bench::program_main(
      "p2p_perf",
      "usage: p2p_perf [--transports tcp,shm,rdma] [--nsocks 1,2,4] [--reps 5] [--no-iperf]\n",
      argc, argv, parse, [](const Options& o) {
        std::vector<Config> configs;
        for (const auto& t : o.transports) {
          if (t == "tcp") {
            for (int n : o.nsocks) configs.push_back({"tcp", n});
          } else {
            configs.push_back({t, 1});
          }
        }
        return run(o, configs);
      });
}
