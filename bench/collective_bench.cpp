// The run loop of the collective benchmarks, after nccl-tests' common.cu: for every size, an
// out-of-place and an in-place measurement (fill, one untimed op, barrier, `iters` ops issued
// back to back, then the per-op time combined across ranks (-a, default max), then a checked
// op), printed in nccl-tests' table on rank 0 followed by one JSON line per size. Buffer
// geometry, in-place offsets and bus-bandwidth factors are nccl-tests'.
#include "bench/collective_bench.h"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <deque>
#include <mutex>
#include <nlohmann/json.hpp>
#include <optional>
#include <thread>

#include "bench/bench_version.h"
#include "bench/device_buffers.h"
#include "bench/machine_info.h"
#include "bench/model_expectation.h"
#include "bench/peer_engine.h"
#include "collectives/device_space.h"
#include "core/cuda_plugin.h"
#include "core/env.h"
#include "core/error.h"
#include "core/host.h"
#include "core/isa.h"
#include "core/log.h"
#include "device/cuda/device_runtime.h"
#include "device/runtime.h"
#include "device/stream.h"
#include "distributed/rank_device.h"
#include "transport/rendezvous.h"

namespace ringlet::bench {
namespace {

using collectives::BufferSpace;
using collectives::Communicator;
using collectives::ReduceOp;
using collectives::WorkPtr;
using core::DType;
using Clock = std::chrono::steady_clock;
using namespace std::chrono_literals;

constexpr std::size_t kMaxInFlight = 64;  // ops queued at once (the queue needs no more)

const char* op_label(Collective c) {
  switch (c) {
    case Collective::all_reduce: return "all_reduce";
    case Collective::all_gather: return "all_gather";
    case Collective::reduce_scatter: return "reduce_scatter";
    case Collective::broadcast: return "broadcast";
  }
  return "?";
}

const char* type_name(DType t) {
  switch (t) {
    case DType::f32: return "float";
    case DType::f64: return "double";
    case DType::f16: return "half";
    case DType::bf16: return "bfloat16";
    case DType::i32: return "int32";
    case DType::i64: return "int64";
    default: return "?";
  }
}

// nccl-tests' getCollByteCount + getBw, in elements of the datatype.
struct Geometry {
  std::size_t send_count = 0, recv_count = 0, param_count = 0;
  std::size_t send_ip_offset = 0, recv_ip_offset = 0;  // in-place offsets per rank
  double alg_bytes = 0, bus_factor = 1;
};

Geometry geometry(Collective c, std::size_t bytes, DType t, int n) {
  Geometry g;
  const std::size_t w = core::dtype_size(t);
  const std::size_t count = bytes / w;
  const double nd = n;
  switch (c) {
    case Collective::all_reduce:
      g.send_count = g.recv_count = g.param_count = count;
      g.bus_factor = 2 * (nd - 1) / nd;
      break;
    case Collective::broadcast: g.send_count = g.recv_count = g.param_count = count; break;
    case Collective::all_gather:
      g.param_count = g.send_count = count / n;
      g.recv_count = g.param_count * n;
      g.send_ip_offset = g.param_count;
      g.bus_factor = (nd - 1) / nd;
      break;
    case Collective::reduce_scatter:
      g.param_count = g.recv_count = count / n;
      g.send_count = g.param_count * n;
      g.recv_ip_offset = g.param_count;
      g.bus_factor = (nd - 1) / nd;
      break;
  }
  const bool per_rank = c == Collective::all_gather || c == Collective::reduce_scatter;
  g.alg_bytes = static_cast<double>(g.param_count * w) * (per_rank ? n : 1);
  return g;
}

struct Result {
  double us = 0, algbw = 0, busbw = 0;
  std::int64_t wrong = -1;  // -1: not checked
  long iters = 0;
  // This rank's communicator's host work per timed op (-1: a peer engine ran them).
  double host_waits = -1, host_messages = -1;
};

class Runner {
 public:
  // Ops run on ringlet's communicator (on the space's device buffers, if any) or, with a peer
  // engine, on the peer's (on buffers of the engine's device).
  Runner(Collective coll, const BenchOptions& o, Communicator& comm,
         collectives::DeviceSpace* space, PeerEngine* peer)
      : coll_(coll),
        o_(o),
        comm_(comm),
        rank_(comm.rank()),
        n_(comm.size()),
        space_(space),
        peer_(peer) {
    send_.assign(o.max_bytes + 64, 0);
    recv_.assign(o.max_bytes + 64, 0);
    if (peer != nullptr && !peer->device().is_cpu()) {
      dev_ = std::make_unique<DeviceBuffers>(peer->device(), o.max_bytes + 64);
    } else if (space != nullptr) {
      dev_ = std::make_unique<DeviceBuffers>(space->device(), o.max_bytes + 64);
    }
  }

  std::int64_t local_errors() const { return local_errors_; }

  Result bench(const Geometry& g, DType t, ReduceOp op, bool in_place) {
    t_ = t;
    op_ = op;
    fill(g, in_place);
    upload();
    issue(g, in_place);  // nccl-tests' "sync" op
    drain();
    wait(comm_.barrier());
    Result r;
    r.iters = o_.iters;
    double elapsed = combine(timed(g, in_place, r.iters));
    for (int attempt = 0; o_.min_time_s > 0 && elapsed < o_.min_time_s && attempt < 3; ++attempt) {
      // Every rank holds the same combined time, so every rank picks the same count.
      const double scale = o_.min_time_s * 1.1 / std::max(elapsed, 1e-9);
      r.iters = std::min<long>(10'000'000, static_cast<long>(std::ceil(r.iters * scale)));
      elapsed = combine(timed(g, in_place, r.iters));
    }
    const double sec = elapsed / static_cast<double>(r.iters);
    if (peer_ == nullptr && timed_.ops > 0) {
      r.host_waits = static_cast<double>(timed_.host_waits) / static_cast<double>(timed_.ops);
      r.host_messages = static_cast<double>(timed_.host_messages) / static_cast<double>(timed_.ops);
    }
    r.us = sec * 1e6;
    r.algbw = g.alg_bytes / 1e9 / sec;
    r.busbw = r.algbw * g.bus_factor;
    for (int c = 0; c < o_.check; ++c) {
      fill(g, in_place);
      upload();
      issue(g, in_place);
      drain();
      download();
      if (o_.corrupt && rank_ == n_ - 1) spoil(g, in_place);
      const std::int64_t local = check(g, in_place);
      if (local > 0) ++local_errors_;
      r.wrong = sum_across(local);
      if (r.wrong != 0) break;
    }
    return r;
  }

  void warm_up(const Geometry& g, DType t, ReduceOp op) {
    t_ = t;
    op_ = op;
    for (int i = 0; i < o_.warmup; ++i) issue(g, false);
    drain();
  }

  // The op at `g` in batches until `seconds` have passed on rank 0's clock (each rank learns it
  // from rank 0, so all run the same batches): before anything is timed, the ranks' processes
  // settle onto their CPUs (two ranks started on one CPU share it until the kernel moves one,
  // about 0.1 s here, and each message costs a context switch till then).
  void settle(const Geometry& g, DType t, ReduceOp op, double seconds) {
    t_ = t;
    op_ = op;
    const auto start = Clock::now();
    for (double elapsed = 0; elapsed < seconds;) {
      for (int i = 0; i < 64; ++i) issue(g, false);
      drain();
      elapsed = std::chrono::duration<double>(Clock::now() - start).count();
      wait(comm_.broadcast(&elapsed, 1, DType::f64, 0));
    }
  }

  double combine(double v) {
    double out = v;
    switch (o_.average) {
      case 0: wait(comm_.broadcast(&out, 1, DType::f64, 0)); return out;
      case 1: wait(comm_.all_reduce(&v, &out, 1, DType::f64, ReduceOp::avg)); return out;
      case 2: wait(comm_.all_reduce(&v, &out, 1, DType::f64, ReduceOp::min)); return out;
      default: wait(comm_.all_reduce(&v, &out, 1, DType::f64, ReduceOp::max)); return out;
    }
  }

  std::int64_t sum_across(std::int64_t v) {
    std::int64_t out = 0;
    wait(comm_.all_reduce(&v, &out, 1, DType::i64, ReduceOp::sum));
    return out;
  }

  void wait(const WorkPtr& w) { w->wait(core::Deadline::after(comm_.timeout() + 10s)); }

 private:
  Pattern pattern() const { return Pattern{coll_, op_, t_, n_, o_.root}; }
  std::size_t w() const { return core::dtype_size(t_); }
  char* send_at(const Geometry& g, bool ip) {
    return ip ? recv_.data() + g.send_ip_offset * rank_ * w() : send_.data();
  }
  char* recv_at(const Geometry& g, bool ip) {
    return recv_.data() + (ip ? g.recv_ip_offset * rank_ * w() : 0);
  }

  // The device's address of a host buffer position (its mirror), or the host's.
  char* on_device(char* host) {
    if (!dev_) return host;
    if (host >= recv_.data() && host < recv_.data() + recv_.size()) {
      return dev_->recv + (host - recv_.data());
    }
    return dev_->send + (host - send_.data());
  }

  // Issues one op without waiting for it (-z 1: then waits); drain() waits for all issued.
  void issue(const Geometry& g, bool ip) {
    if (peer_ != nullptr) {
      peer_->issue(CollectiveCall{coll_, on_device(send_at(g, ip)), on_device(recv_at(g, ip)),
                                  g.param_count, t_, op_, o_.root});
    } else {
      pending_.push_back(start(g, ip));
      if (pending_.size() > kMaxInFlight) retire_older_half();
    }
    if (o_.blocking != 0) drain();
  }

  // Waits for the older half of the ops in flight: first for the newest of them, so that this
  // thread wakes once for the lot (ops on a channel end in issue order) instead of once per op,
  // which took the cores from the ops' own threads (2 ranks, 1 MiB: 2 context switches per op).
  void retire_older_half() {
    const std::size_t keep = kMaxInFlight / 2;
    wait(pending_[pending_.size() - 1 - keep]);
    while (pending_.size() > keep) {
      wait(pending_.front());
      pending_.pop_front();
    }
  }

  void drain() {
    if (peer_ != nullptr) {
      peer_->drain(core::Deadline::after(comm_.timeout() + 10s));
      return;
    }
    while (!pending_.empty()) {
      wait(pending_.front());
      pending_.pop_front();
    }
  }

  WorkPtr start(const Geometry& g, bool ip) {
    char* send = on_device(send_at(g, ip));
    char* recv = on_device(recv_at(g, ip));
    collectives::BufferSpace* space = space_;
    switch (coll_) {
      case Collective::all_reduce:
        return comm_.all_reduce(send, recv, g.param_count, t_, op_, space);
      case Collective::all_gather: return comm_.all_gather(send, recv, g.param_count, t_, space);
      case Collective::reduce_scatter:
        return comm_.reduce_scatter(send, recv, g.param_count, t_, op_, space);
      case Collective::broadcast: break;
    }
    if (ip || rank_ != o_.root) return comm_.broadcast(recv, g.param_count, t_, o_.root, space);
    // Out of place on the root: the chain only reads the send buffer, and the root's own copy
    // into recv (as ncclBroadcast makes) runs while the op progresses.
    WorkPtr work = comm_.broadcast(send, g.param_count, t_, o_.root, space);
    if (g.param_count > 0) {
      if (dev_) {
        dev_->blocking_copy(recv, send, g.param_count * w());
      } else {
        std::memcpy(recv, send, g.param_count * w());
      }
    }
    return work;
  }

  // Device buffers: the host's filled buffers go up before an op, its results come down after.
  void upload() {
    if (!dev_) return;
    dev_->blocking_copy(dev_->send, send_.data(), dev_->bytes);
    dev_->blocking_copy(dev_->recv, recv_.data(), dev_->bytes);
  }
  void download() {
    if (dev_) dev_->blocking_copy(recv_.data(), dev_->recv, dev_->bytes);
  }

  // The time of `iters` ops; timed_ holds what the communicator counted for them.
  double timed(const Geometry& g, bool ip, long iters) {
    wait(comm_.barrier());
    const collectives::CommCounters before = comm_.counters();
    const auto t0 = Clock::now();
    for (long i = 0; i < iters; ++i) issue(g, ip);
    drain();
    const double elapsed = std::chrono::duration<double>(Clock::now() - t0).count();
    timed_ = comm_.counters() - before;
    return elapsed;
  }

  // nccl-tests' InitData: inputs where the op reads them, a sentinel where results land.
  void fill(const Geometry& g, bool ip) {
    const Pattern p = pattern();
    char* send = send_at(g, ip);
    char* recv = recv_at(g, ip);
    switch (coll_) {
      case Collective::all_reduce:
        if (!ip) fill_sentinel(p, recv, g.recv_count);
        fill_input(p, rank_, send, 0, g.send_count);
        break;
      case Collective::reduce_scatter:
        if (!ip) fill_sentinel(p, recv, g.recv_count);
        fill_input(p, rank_, send, 0, g.send_count);
        break;
      case Collective::all_gather:
        fill_sentinel(p, recv_.data(), g.recv_count);
        fill_input(p, rank_, send, 0, g.send_count);
        break;
      case Collective::broadcast:
        fill_sentinel(p, recv, g.recv_count);
        if (!ip || rank_ == o_.root) fill_input(p, rank_, ip ? recv : send, 0, g.send_count);
        break;
    }
  }

  void spoil(const Geometry& g, bool ip) {
    if (g.recv_count == 0) return;
    char* data = coll_ == Collective::reduce_scatter ? recv_at(g, ip) : recv_.data();
    fill_sentinel(pattern(), data + (g.recv_count / 2) * w(), 1);
  }

  std::int64_t check(const Geometry& g, bool ip) {
    const Pattern p = pattern();
    const char* recv = recv_at(g, ip);
    if (coll_ == Collective::reduce_scatter) {
      return count_wrong(p, recv, g.param_count * rank_, g.recv_count, 0);
    }
    return count_wrong(p, recv_.data(), 0, g.recv_count, g.param_count);
  }

  Collective coll_;
  const BenchOptions& o_;
  Communicator& comm_;
  int rank_, n_;
  collectives::DeviceSpace* space_;  // ringlet's ops on device buffers: through this space
  PeerEngine* peer_;                 // a peer program: its ops instead of ringlet's
  std::deque<WorkPtr> pending_;      // ringlet's ops issued and not yet waited for
  std::vector<char> send_, recv_;
  std::unique_ptr<DeviceBuffers> dev_;  // device buffers, when the benchmark uses them
  DType t_ = DType::f32;
  ReduceOp op_ = ReduceOp::sum;
  std::int64_t local_errors_ = 0;
  collectives::CommCounters timed_;  // what the last timed() counted
};

std::string time_str(double us) {  // nccl-tests' widths: 2, 1 or 0 decimals
  char buf[32];
  std::snprintf(buf, sizeof buf, us >= 10000.0 ? "%7.0f" : us >= 100.0 ? "%7.1f" : "%7.2f", us);
  return buf;
}

void print_header(const BenchOptions& o, transport::Store& store, int rank, int n,
                  const std::string& transport, const std::string& device) {
  const auto deadline = core::Deadline::after(60s);
  char line[512];
  std::snprintf(line, sizeof line, "#  Rank %2d Group %2d Pid %6d on %10s device %s [%s] %s\n",
                rank, 0, static_cast<int>(::getpid()), core::host_name().c_str(), device.c_str(),
                transport.c_str(), cpu_model().c_str());
  store.set("bench/rank_line/" + std::to_string(rank), line);
  if (rank != 0) return;
  std::printf(
      "# nThread %d nGpus 1 minBytes %zu maxBytes %zu step: %zu(%s) warmup iters: %d iters: %d "
      "agg iters: 1 validation: %d graph: 0\n",
      o.threads ? o.np : 1, o.min_bytes, o.max_bytes,
      o.step_factor > 1 ? o.step_factor : o.step_bytes, o.step_factor > 1 ? "factor" : "bytes",
      o.warmup, o.iters, o.check);
  if (o.blocking != 0) {
    std::printf("# Blocking Enabled: wait for completion and barrier after each collective \n");
  }
  std::printf("# CPU kernels: %s\n", isa_in_use().c_str());
  std::printf("#\n# Using devices\n");
  for (int r = 0; r < n; ++r) {
    std::printf("%s", store.get("bench/rank_line/" + std::to_string(r), deadline).c_str());
  }
  std::printf("#\n");
  std::printf(
      "# %10s  %12s  %8s  %6s  %6s           out-of-place                       in-place"
      "          \n",
      "", "", "", "", "");
  const bool model = !o.model.empty();
  std::printf("# %10s  %12s  %8s  %6s  %6s  %7s  %6s  %6s %6s  %7s  %6s  %6s %6s%s\n", "size",
              "count", "type", "redop", "root", "time", "algbw", "busbw", "#wrong", "time", "algbw",
              "busbw", "#wrong", model ? "   model" : "");
  std::printf("# %10s  %12s  %8s  %6s  %6s  %7s  %6s  %6s  %5s  %7s  %6s  %6s  %5s%s\n", "(B)",
              "(elements)", "", "", "", "(us)", "(GB/s)", "(GB/s)", "", "(us)", "(GB/s)", "(GB/s)",
              "", model ? "  (GB/s)" : "");
  std::fflush(stdout);
}

// The sizes -b, -e and -f / -i sweep, smallest first.
std::vector<std::size_t> sweep_sizes(const BenchOptions& o) {
  std::vector<std::size_t> sizes;
  for (std::size_t size = o.min_bytes; size <= o.max_bytes;
       size = o.step_factor > 1 ? size * o.step_factor : size + o.step_bytes) {
    sizes.push_back(size);
  }
  return sizes;
}

// "8 B", "64 KiB", "128 MiB" (exact multiples only; "1536 B" otherwise stays in bytes).
std::string size_text(std::size_t bytes) {
  if (bytes >= (1u << 20) && bytes % (1u << 20) == 0) return core::str(bytes >> 20, " MiB");
  if (bytes >= 1024 && bytes % 1024 == 0) return core::str(bytes >> 10, " KiB");
  return core::str(bytes, " B");
}

// The algorithm ringlet runs for one op of `bytes` per rank: the all-reduce's depends on the
// size, the world and the ranks' memory access, the all-gather's and the reduce-scatter's on
// RINGLET_ALGO; the others have one each.
std::string algorithm_of(Collective coll, const Communicator& comm, const BufferSpace* space,
                         std::size_t bytes) {
  switch (coll) {
    case Collective::all_reduce:
      return collectives::algorithm_name(comm.all_reduce_algorithm(bytes, space));
    case Collective::all_gather:
      return collectives::algorithm_name(comm.all_gather_algorithm(space));
    case Collective::reduce_scatter:
      return collectives::algorithm_name(comm.reduce_scatter_algorithm(space));
    case Collective::broadcast: return "chain";
    default: return "ring";
  }
}

// "# Algorithm: ring (8 B - 64 KiB), window (128 KiB - 128 MiB)": the algorithms the sweep's
// sizes run, in runs of sizes, so a reader of the table knows which one each row measured.
void print_algorithms(Collective coll, const BenchOptions& o, const Communicator& comm,
                      const BufferSpace* space) {
  std::vector<std::pair<std::string, std::pair<std::size_t, std::size_t>>> runs;
  const DType t = o.types.front();
  for (const std::size_t size : sweep_sizes(o)) {
    const Geometry g = geometry(coll, size, t, comm.size());
    const std::string name = algorithm_of(coll, comm, space, g.send_count * core::dtype_size(t));
    const std::size_t bytes = std::max(g.send_count, g.recv_count) * core::dtype_size(t);
    if (runs.empty() || runs.back().first != name) runs.push_back({name, {bytes, bytes}});
    runs.back().second.second = bytes;
  }
  std::string line;
  for (const auto& [name, range] : runs) {
    line += core::str(line.empty() ? "" : ", ", name, " (", size_text(range.first),
                      range.second == range.first ? "" : " - " + size_text(range.second), ")");
  }
  std::printf("# Algorithm: %s\n#\n", line.c_str());
  std::fflush(stdout);
}

// The --model column: the expected busbw, '*' when the row's is more than 30% off it.
void print_expected(ModelExpectation& model, const std::string& algorithm, std::size_t bytes,
                    const Result& oop, const Result& ip) {
  const auto expected = model.bus_GBps(algorithm, bytes);
  if (!expected) {
    std::printf("  %6s", "-");
    return;
  }
  const double measured = (oop.busbw + ip.busbw) / 2;
  std::printf("  %6.2f%s", *expected, ModelExpectation::off(measured, *expected) ? "*" : "");
}

void print_result(const Result& r) {
  char wrong[32];
  if (r.wrong < 0) {
    std::snprintf(wrong, sizeof wrong, "%5s", "N/A");
  } else {
    std::snprintf(wrong, sizeof wrong, "%5lld", static_cast<long long>(r.wrong));
  }
  std::printf("  %7s  %6.2f  %6.2f  %s", time_str(r.us).c_str(), r.algbw, r.busbw, wrong);
}

nlohmann::json result_json(const char* prefix, const Result& r) {
  const std::string p = prefix;
  nlohmann::json j{
      {p + "_us", r.us}, {p + "_algbw", r.algbw}, {p + "_busbw", r.busbw}, {p + "_iters", r.iters}};
  j[p + "_wrong"] = r.wrong < 0 ? nlohmann::json(nullptr) : nlohmann::json(r.wrong);
  if (r.host_waits >= 0) {
    j[p + "_host_waits"] = r.host_waits;
    j[p + "_host_messages"] = r.host_messages;
  }
  return j;
}

// One size's JSON line (after the table): what ran, where, and both results.
std::string result_row(const std::string& program, Collective coll, std::size_t bytes,
                       const Geometry& g, DType t, const char* redop, int root, int n,
                       const std::string& transport, const std::string& algo, const Result& oop,
                       const Result& ip) {
  nlohmann::json j{{"bench", program},
                   {"op", op_label(coll)},
                   {"size", bytes},
                   {"count", g.param_count},
                   {"type", type_name(t)},
                   {"redop", redop},
                   {"root", root},
                   {"nranks", n},
                   {"transport", transport},
                   {"algo", algo},
                   {"host", core::host_name()},
                   {"isa", isa_in_use()},
                   {"commit", RINGLET_BENCH_COMMIT}};
  j.update(result_json("oop", oop));
  j.update(result_json("ip", ip));
  return j.dump();
}

// After the table (comment lines, so the table stays nccl-tests'): rank 0's host work per op.
void print_host_work(const std::vector<std::string>& rows) {
  if (rows.empty()) return;
  std::printf(
      "#\n# Host work per op (rank 0's communicator, the timed ops; out-of-place | "
      "in-place):\n");
  std::printf("# %10s  %8s  %8s | %8s  %8s\n", "size (B)", "waits", "messages", "waits",
              "messages");
  for (const auto& row : rows) std::printf("%s\n", row.c_str());
}

std::string host_work_row(std::size_t bytes, const Result& oop, const Result& ip) {
  char row[96];
  std::snprintf(row, sizeof row, "# %10zu  %8.2f  %8.2f | %8.2f  %8.2f", bytes, oop.host_waits,
                oop.host_messages, ip.host_waits, ip.host_messages);
  return row;
}

// -g 1's device: cuda when a GPU is there, else the emulated device, saying why where this build
// has CUDA but cannot use it (its plugin did not load: a missing library, say).
std::string gpu_flag_device() {
  if (device::usable_gpu_count() > 0) return "cuda";
  if (device::cuda::built_with_cuda() && !core::cuda_plugin_unavailable().empty())
    core::log(core::LogLevel::warn, "-g 1: the emulated device, as CUDA is unavailable: ",
              core::cuda_plugin_unavailable());
  return "emu";
}

// The device space of -g 1 / --device (null for host buffers): device local rank % count, on
// gpu_flag_device() when -g 1 alone.
std::unique_ptr<collectives::DeviceSpace> device_space(const BenchOptions& o, Communicator& comm,
                                                       transport::Store& store) {
  std::string kind = o.device;
  if (kind == "cpu" && o.gpu_flag) kind = gpu_flag_device();
  RINGLET_CHECK(kind != "cpu" || o.link != "ipc", ValueError,
                "-t ipc moves device buffers: add -g 1 or --device emu|cuda");
  if (kind == "cpu") return nullptr;
  transport::InitInfo info;
  info.local_rank = comm.rank();
  const core::Device device = distributed::rank_device(kind, info);
  collectives::DeviceSpaceOptions so;
  so.link = collectives::parse_device_link(o.link);
  return collectives::DeviceSpace::create(store, "bench/device", comm.rank(), comm.size(), device,
                                          so, core::Deadline::after(120s));
}

// Where the measured ops run: a peer program's engine, ringlet's communicator on a device space
// (-g 1 / --device), or ringlet's on host buffers; `label` and `device` are the header's
// transport and device columns.
struct Backend {
  std::unique_ptr<PeerEngine> engine;
  std::unique_ptr<collectives::DeviceSpace> space;
  std::string label, device;
  // --threads: this rank's own stream, current on its thread (ranks that shared one stream
  // would queue one rank's wait ahead of another's part of the same op).
  std::unique_ptr<device::StreamGuard> own_stream;
};

Backend make_backend(const BenchOptions& o, Communicator& comm, transport::Store& store,
                     const PeerProgram* peer) {
  Backend b;
  if (peer != nullptr) {
    b.engine = peer->create(o, comm, store);
    b.label = b.engine->label();
    b.device = core::str(b.engine->device());
    return b;
  }
  b.space = device_space(o, comm, store);
  if (o.threads && b.space) {
    b.own_stream = std::make_unique<device::StreamGuard>(device::new_stream(b.space->device()));
  }
  // The transports this rank's connections actually use (auto resolved), not the request.
  const std::string transports = comm.transports();
  b.label = b.space ? core::str(transports, ", ", b.space->ipc() ? "ipc" : "staged") : transports;
  b.device = b.space ? core::str(b.space->device()) : "cpu";
  return b;
}

}  // namespace

// Runs every (type, op, size) on this rank; returns the exit status.
int run_all(Collective coll, const std::string& program, const BenchOptions& o, Communicator& comm,
            transport::Store& store, const PeerProgram* peer) {
  const int rank = comm.rank();
  const int n = comm.size();
  const bool rooted = coll == Collective::broadcast;
  const bool reducing = coll == Collective::all_reduce || coll == Collective::reduce_scatter;
  RINGLET_CHECK(!rooted || o.root < n, ValueError, "-r ", o.root, ": root must be below the ", n,
                " ranks");
  const Backend backend = make_backend(o, comm, store, peer);
  print_header(o, store, rank, n, backend.label, backend.device);
  if (rank == 0 && !backend.engine) print_algorithms(coll, o, comm, backend.space.get());
  Runner runner(coll, o, comm, backend.space.get(), backend.engine.get());
  std::optional<ModelExpectation> model;
  if (rank == 0 && !o.model.empty() && !backend.engine) {
    model.emplace(o.model, op_label(coll), n, backend.label);
    std::printf("%s#\n", model->note().c_str());
  }
  std::vector<std::string> json_lines, host_rows;
  double busbw_sum = 0;
  int busbw_count = 0;
  const std::vector<ReduceOp> ops = reducing ? o.ops : std::vector<ReduceOp>{ReduceOp::sum};
  bool settled = false;  // --warmup-time: once, before the first size is timed
  for (DType t : o.types) {
    for (ReduceOp op : ops) {
      runner.warm_up(geometry(coll, o.max_bytes, t, n), t, op);
      runner.warm_up(geometry(coll, o.min_bytes, t, n), t, op);
      if (o.warmup_time_s > 0 && !settled) {
        runner.settle(geometry(coll, o.min_bytes, t, n), t, op, o.warmup_time_s);
        settled = true;
      }
      for (const std::size_t size : sweep_sizes(o)) {
        const Geometry g = geometry(coll, size, t, n);
        const std::size_t w = core::dtype_size(t);
        const std::size_t bytes = std::max(g.send_count, g.recv_count) * w;
        const char* redop = reducing ? collectives::reduce_op_name(op) : "none";
        const int root = rooted ? o.root : -1;
        if (rank == 0) {
          std::printf("%12zu  %12zu  %8s  %6s  %6i", bytes, g.param_count, type_name(t), redop,
                      root);
          std::fflush(stdout);
        }
        Result oop, ip;
        try {
          oop = runner.bench(g, t, op, false);
          if (rank == 0) print_result(oop);
          ip = runner.bench(g, t, op, true);
        } catch (...) {
          if (rank == 0) std::printf("\n");  // end the open row before the error is printed
          std::fflush(stdout);
          throw;
        }
        const std::string algo =
            backend.engine ? backend.engine->label()
                           : algorithm_of(coll, comm, backend.space.get(), g.send_count * w);
        if (rank == 0) {
          print_result(ip);
          if (model) print_expected(*model, algo, bytes, oop, ip);
          std::printf("\n");
          std::fflush(stdout);
        }
        busbw_sum += oop.busbw + ip.busbw;
        busbw_count += 2;
        if (oop.host_waits >= 0) host_rows.push_back(host_work_row(bytes, oop, ip));
        json_lines.push_back(
            result_row(program, coll, bytes, g, t, redop, root, n, backend.label, algo, oop, ip));
      }
    }
  }
  const auto errors = runner.sum_across(runner.local_errors());
  if (rank == 0) {
    print_host_work(host_rows);
    std::printf("# Out of bounds values : %lld %s\n", static_cast<long long>(errors),
                errors ? "FAILED" : "OK");
    std::printf("# Avg bus bandwidth    : %g \n", busbw_count ? busbw_sum / busbw_count : 0.0);
    std::printf("#\n");
    for (const auto& line : json_lines) std::printf("%s\n", line.c_str());
    std::fflush(stdout);
  }
  return errors == 0 ? 0 : 1;
}

}  // namespace ringlet::bench
