// Ping-pongs over real meshes, reduction and copy rates, and the least-squares fit.
#include "model/fit.h"

#include <pthread.h>
#include <sched.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <ctime>
#include <functional>
#include <sstream>
#include <thread>
#include <tuple>
#include <utility>

#include "collectives/reduce_kernels.h"
#include "core/copy.h"
#include "core/error.h"
#include "core/log.h"
#include "model/caches.h"
#include "model/median.h"
#include "model/op_costs.h"
#include "model/rank_threads.h"
#include "model/shared_lines.h"
#include "transport/discovery.h"
#include "transport/mesh.h"
#include "transport/rendezvous.h"
#include "transport/shm/connection.h"
#include "transport/tcp_store.h"

namespace ringlet::model {
namespace {

using Clock = std::chrono::steady_clock;
using namespace std::chrono_literals;

double mean(const std::vector<double>& v) {
  double sum = 0;
  for (const double x : v) sum += x;
  return v.empty() ? 0 : sum / static_cast<double>(v.size());
}

double seconds_since(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

// 512 KiB: the ring's slices; 128 KiB: a 2-rank ring's messages at 256 KiB.
const std::vector<std::size_t> kSizes{8,         4 << 10, 64 << 10, 128 << 10, 256 << 10,
                                      512 << 10, 1 << 20, 4 << 20,  16 << 20};

// Rank 0's times of `bytes` moved between two ranks, enough rounds to move about `budget`
// bytes each way (5 .. 400 of them; two more first, to warm up): one way of a ping-pong (half
// its round trip), or a whole exchange (both ranks send and receive at once, as in the ring's
// steps).
enum class Pattern { ping_pong, exchange };

std::vector<double> message_times(Pattern pattern, int rank, transport::Connection& peer,
                                  std::size_t bytes, std::size_t budget) {
  const std::size_t rounds =
      std::clamp<std::size_t>(budget / std::max<std::size_t>(bytes, 1), 5, 400);
  std::vector<char> out(bytes), in(bytes);
  std::vector<double> times;
  const auto deadline = core::Deadline::after(60s);
  for (std::size_t i = 0; i < rounds + 2; ++i) {
    const auto start = Clock::now();
    if (pattern == Pattern::exchange) {
      auto received = peer.recv(in.data(), bytes);
      peer.send(out.data(), bytes)->wait(deadline);
      received->wait(deadline);
    } else if (rank == 0) {
      peer.send(out.data(), bytes)->wait(deadline);
      peer.recv(in.data(), bytes)->wait(deadline);
    } else {
      peer.recv(in.data(), bytes)->wait(deadline);
      peer.send(out.data(), bytes)->wait(deadline);
    }
    if (i >= 2) times.push_back(seconds_since(start) / (pattern == Pattern::exchange ? 1 : 2));
  }
  return times;
}

// Slope over the sizes from 256 KiB of one of a sample's times, seconds per byte.
double slope_from_256k(const std::vector<Sample>& samples, double Sample::*us) {
  double n = 0, sx = 0, sy = 0, sxx = 0, sxy = 0;
  for (const Sample& s : samples) {
    if (s.bytes < (256u << 10)) continue;
    const double x = static_cast<double>(s.bytes), y = s.*us * 1e-6;
    n += 1;
    sx += x;
    sy += y;
    sxx += x * x;
    sxy += x * y;
  }
  return (n * sxy - sx * sy) / (n * sxx - sx * sx);
}

// The CPUs' share of a copying link's message, as a rate: one way, a message holds the link for
// bytes / bandwidth; in an exchange both messages also need the two ranks' cores, each a core at
// each end, so the second waits for the first's copies: the exchange takes bytes / cpu rate
// beyond one way. At most `copy_GBps` (a core's memcpy); that too where the exchange is no
// slower than one way.
double cpu_share_GBps(const std::vector<Sample>& samples, double copy_GBps) {
  const double extra = slope_from_256k(samples, &Sample::exchange_us) -
                       slope_from_256k(samples, &Sample::one_way_us);
  return extra > 0 ? std::min(copy_GBps, 1 / extra / 1e9) : copy_GBps;
}

// Latency: the smallest size's time; bandwidth: the slope over the sizes from 256 KiB.
LinkCost fit_link(const std::vector<Sample>& samples) {
  const double slope = slope_from_256k(samples, &Sample::one_way_us);
  RINGLET_CHECK(slope > 0, Error, "model fit: the one-way time did not grow with the size (", slope,
                " s per byte): the machine was too busy to measure");
  return {samples.front().one_way_us, 1 / slope / 1e9};
}

// Each size's mean one-way time (ping-pong) and exchange time between this rank and `peer`: a
// collective's time is its messages' in a stream, and a stream has its slow ones (the benchmarks
// report an op's mean time); with the vCPUs apart, a stream of 64 KiB - 1 MiB shm exchanges took
// 1.2-1.6x its median (bench/RESULTS.md, 2026-12-03 "A message's mean time");
// both ranks take part, rank 0's figures are the ones kept.
std::vector<Sample> link_samples(int rank, transport::Connection& peer,
                                 const std::vector<std::size_t>& sizes, std::size_t budget) {
  std::vector<Sample> samples;
  // The largest size first, a few times, unmeasured: a tcp connection paced by bbr (the link
  // between hosts, where the system's default is bbr; loopback asks for cubic) that has carried
  // large messages moves mid-size ones up to twice as slowly as a fresh one, and a collective's
  // has (all_reduce_perf warms up at its largest size; a training job's buckets are megabytes):
  // bench/RESULTS.md, 2026-12-02 "A tcp connection's history".
  message_times(Pattern::exchange, rank, peer, sizes.back(), 0);
  for (const std::size_t bytes : sizes) {
    const double one_way = mean(message_times(Pattern::ping_pong, rank, peer, bytes, budget));
    const double exchange = mean(message_times(Pattern::exchange, rank, peer, bytes, budget));
    samples.push_back({bytes, one_way * 1e6, exchange * 1e6});
  }
  return samples;
}

// Each size's fastest of two fits of one link (a sitting can be slow as a whole).
void keep_fastest(LinkFit& best, const LinkFit& again) {
  if (best.samples.empty()) {
    best.samples = again.samples;
    return;
  }
  for (std::size_t k = 0; k < best.samples.size(); ++k) {
    best.samples[k].one_way_us = std::min(best.samples[k].one_way_us, again.samples[k].one_way_us);
    best.samples[k].exchange_us =
        std::min(best.samples[k].exchange_us, again.samples[k].exchange_us);
  }
}

// A ping-pong and an exchange per size between two ranks (on one CPU with `one_cpu`).
LinkFit measure_link_once(const std::string& transport, const std::vector<std::size_t>& sizes,
                          bool one_cpu, bool quick) {
  const std::size_t budget = quick ? (std::size_t{1} << 20) : (std::size_t{256} << 20);
  LinkFit fit{transport == "tcp" ? "tcp loopback" : transport, {}, {}};
  on_ranks(transport, 2, one_cpu, [&](int rank, transport::Mesh& mesh) {
    auto samples = link_samples(rank, mesh.peer(1 - rank), sizes, budget);
    if (rank == 0) fit.samples = std::move(samples);
  });
  return fit;
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

// Rank 0 reads 16 MiB of rank 1's memory over their shm connection (cross-memory attach), as
// the direct all-reduce does: GB/s, the median of several reads; 0 where the connection cannot.
double measure_peer_read(bool quick) {
  constexpr std::size_t kBytes = std::size_t{16} << 20;
  double rate = 0;
  on_ranks("shm", 2, false, [&](int rank, transport::Mesh& mesh) {
    transport::Connection& peer = mesh.peer(1 - rank);
    std::vector<char> buffer(kBytes, 1);
    const auto deadline = core::Deadline::after(60s);
    std::uint64_t where = reinterpret_cast<std::uintptr_t>(buffer.data());
    if (rank == 1) {  // publish the buffer, keep it until rank 0 has read it
      peer.send(&where, sizeof where)->wait(deadline);
      peer.recv(&where, sizeof where)->wait(deadline);
      return;
    }
    peer.recv(&where, sizeof where)->wait(deadline);
    if (peer.can_read_peer()) {
      rate =
          rate_GBps(kBytes, quick ? 2 : 9, [&] { peer.read_peer(buffer.data(), where, kBytes); });
    }
    peer.send(&where, sizeof where)->wait(deadline);
  });
  return rate;
}

// The link measured `sittings` times, each size's fastest mean kept: two ranks sharing two
// cores sometimes sleep between messages, which makes a whole sitting slow.
LinkFit measure_link(const std::string& transport, const std::vector<std::size_t>& sizes,
                     bool one_cpu, int sittings, bool quick) {
  LinkFit best = measure_link_once(transport, sizes, one_cpu, quick);
  for (int i = 1; i < sittings; ++i) {
    keep_fastest(best, measure_link_once(transport, sizes, one_cpu, quick));
  }
  return best;
}

// The link between the two ranks of a launched job (ringlet launch, a rank on each of two
// hosts): ping-pongs over their mesh's tcp connection, `sittings` meshes, each size's fastest
// median kept.
LinkFit measure_job_link(int sittings, bool quick, int& rank) {
  constexpr const char* kJob =
      "model fit --between-ranks: runs as a job of 2 ranks (ringlet launch --nnodes 2 "
      "--nproc-per-node 1 -- ringlet model fit --between-ranks); this one ";
  RINGLET_CHECK(transport::launched_as_rank(), ValueError, kJob, "has no launcher");
  const transport::InitInfo info = transport::discover({});
  RINGLET_CHECK(info.world_size == 2, ValueError, kJob, "has ", info.world_size);
  rank = info.rank;
  auto store = transport::open_store(info, core::Deadline::after(60s));
  LinkFit best{"tcp between ranks 0 and 1", {}, {}};
  for (int sitting = 0; sitting < sittings; ++sitting) {
    transport::MeshOptions o;
    o.rank = rank;
    o.world_size = 2;
    o.transport = "tcp";
    o.prefix = "fit-job-" + std::to_string(sitting);
    o.store_host = info.master_addr.empty() ? "127.0.0.1" : info.master_addr;
    auto mesh = transport::Mesh::connect(*store, o, core::Deadline::after(60s));
    const std::size_t budget = quick ? (std::size_t{1} << 20) : (std::size_t{64} << 20);
    keep_fastest(best,
                 {best.transport, link_samples(rank, mesh->peer(1 - rank), kSizes, budget), {}});
    transport::store_barrier(*store, o.prefix + "/end", 2, core::Deadline::after(60s));
  }
  return best;
}

// An 8-byte token around `ranks` ranks over `transport`: a hop's time (a round's over the ranks),
// us, the median of `rounds` rounds after two unmeasured. With `one_cpu` all ranks share one CPU;
// without, they alternate between two (on_ranks), so every hop goes to the other CPU, to a rank
// whose CPU the ranks share by halves.
double token_hop_us(const std::string& transport, int ranks, bool one_cpu, int rounds) {
  std::vector<double> hops;
  on_ranks(transport, ranks, one_cpu, [&](int rank, transport::Mesh& mesh) {
    transport::Connection& next = mesh.peer((rank + 1) % ranks);
    transport::Connection& previous = mesh.peer((rank + ranks - 1) % ranks);
    std::uint64_t token = 0;
    const auto deadline = core::Deadline::after(60s);
    for (int i = 0; i < rounds + 2; ++i) {
      const auto start = Clock::now();
      if (rank == 0) next.send(&token, sizeof token)->wait(deadline);
      previous.recv(&token, sizeof token)->wait(deadline);
      if (rank != 0) next.send(&token, sizeof token)->wait(deadline);
      if (rank == 0 && i >= 2) hops.push_back(seconds_since(start) * 1e6 / ranks);
    }
  });
  return median(hops);
}

// The fastest of `sittings` such hops around four ranks.
double four_ranks_hop_us(const std::string& transport, bool one_cpu, int sittings, bool quick) {
  double best = token_hop_us(transport, 4, one_cpu, quick ? 20 : 2000);
  for (int i = 1; i < sittings; ++i)
    best = std::min(best, token_hop_us(transport, 4, one_cpu, 2000));
  return best;
}

// Ranks on one CPU: a message's one-way time is the wake-up of the rank it is for, on top of the
// link's latency: what a message costs a host whose ranks take turns on its cores. Two ranks
// (a ping-pong), and four around a ring, whose receivers take turns with two other waiters.
void measure_wakeup(MachineFit& fit, bool tcp_loopback, int sittings, bool quick) {
  fit.one_cpu = measure_link("shm", {8}, true, sittings, quick).samples.front().one_way_us;
  fit.wakeup_us = std::max(0.0, fit.one_cpu - fit.shm.cost.latency_us);
  fit.one_cpu_four = four_ranks_hop_us("shm", true, sittings, quick);
  fit.two_cpus_four = four_ranks_hop_us("shm", false, sittings, quick);
  if (tcp_loopback) {
    fit.tcp_one_cpu = measure_link("tcp", {8}, true, sittings, quick).samples.front().one_way_us;
    fit.tcp_one_cpu_four = four_ranks_hop_us("tcp", true, sittings, quick);
    fit.tcp_two_cpus_four = four_ranks_hop_us("tcp", false, sittings, quick);
  }
}

// One thread's float32 sum and copy (core::copy, as the collectives copy) with outputs of `bytes`:
// GB/s, the medians of `runs`.
std::pair<double, double> reduce_and_copy_GBps(std::size_t bytes, int runs) {
  const std::size_t count = bytes / sizeof(float);
  std::vector<float> a(count, 1.0f), b(count, 2.0f), out(count);
  const double reduce = rate_GBps(bytes, runs, [&] {
    collectives::reduce_pair(out.data(), a.data(), b.data(), count, collectives::DType::f32,
                             collectives::ReduceOp::sum);
  });
  return {reduce, rate_GBps(bytes, runs, [&] { core::copy(out.data(), a.data(), bytes); })};
}

// One thread's float32 sum into a buffer of `bytes`, slice by slice, of a 64 KiB slice it keeps
// in its cache, as the collectives reduce what they received into their own buffer: GB/s of the
// buffer, the median of `runs`.
double reduce_in_place_GBps(std::size_t bytes, int runs) {
  constexpr std::size_t kSlice = std::size_t{64} << 10;
  const std::size_t slice = kSlice / sizeof(float), count = bytes / sizeof(float);
  std::vector<float> buffer(count, 1.0f), received(slice, 2.0f);
  return rate_GBps(bytes, runs, [&] {
    for (std::size_t at = 0; at < count; at += slice) {
      collectives::reduce_pair(buffer.data() + at, buffer.data() + at, received.data(),
                               std::min(slice, count - at), collectives::DType::f32,
                               collectives::ReduceOp::sum);
    }
  });
}

// Over outputs past a core's own cache, and over buffers that fit it (fit.core_cache_bytes,
// read first) eight times over; in place, over four times a core's cache (4 MiB where unknown).
void measure_rates(MachineFit& fit, bool quick) {
  std::tie(fit.reduce_GBps, fit.copy_GBps) = reduce_and_copy_GBps(
      past_core_cache_bytes(fit.core_cache_bytes, fit.cache_bytes), quick ? 4 : 200);
  fit.reduce_in_place_GBps =
      reduce_in_place_GBps(in_place_reduce_bytes(fit.core_cache_bytes), quick ? 4 : 100);
  if (fit.core_cache_bytes >= 4096) {
    std::tie(fit.cached_reduce_GBps, fit.cached_copy_GBps) =
        reduce_and_copy_GBps(fit.core_cache_bytes / 8, quick ? 20 : 400);
  }
}

// 64 KiB, which a core's cache holds, and four times a core's cache (4 MiB where unknown), of
// which the reader's core keeps only its last part: the rest is written where the last level
// holds it.
void measure_shared_lines(MachineFit& fit, bool quick) {
  const SharedRates held = shared_lines(64 * 1024, quick ? 50 : 2000);
  fit.shared_write_GBps = held.write_GBps;
  fit.shared_read_GBps = held.read_GBps;
  const std::size_t past = fit.core_cache_bytes > 0 ? 4 * fit.core_cache_bytes : 4 << 20;
  if (held.write_GBps > 0) {
    fit.shared_write_past_GBps = shared_lines(past, quick ? 5 : 200).write_GBps;
  }
}

// Every core (up to 16, which saturate a socket's memory) copies a buffer of its own, well past
// the cache, at once: the host's memory bandwidth (bytes copied per second, all cores
// together), the median of several rounds.
int copying_cores() {
  return static_cast<int>(std::clamp(std::thread::hardware_concurrency(), 1u, 16u));
}

void measure_memory(MachineFit& fit, bool quick) {
  const int threads = copying_cores();
  // The cores share the cache: together their buffers are at least twice its size.
  const std::size_t bytes = std::max<std::size_t>(
      std::size_t{64} << 20, 2 * fit.last_level_bytes / static_cast<std::size_t>(threads));
  fit.memory_GBps = all_cores_copying_GBps(threads, bytes, bytes, quick ? 1 : 5);
}

// The host's rates (reduction, copy, a peer's memory, lines another core shares, memory),
// measured `sittings` times, each one's fastest kept: as for the links, a sitting can be slow
// as a whole.
void measure_host_rates(MachineFit& fit, int sittings, bool quick) {
  constexpr double MachineFit::*kRates[] = {
      &MachineFit::peer_read_GBps,   &MachineFit::reduce_GBps,
      &MachineFit::copy_GBps,        &MachineFit::cached_reduce_GBps,
      &MachineFit::cached_copy_GBps, &MachineFit::shared_write_GBps,
      &MachineFit::shared_read_GBps, &MachineFit::shared_write_past_GBps,
      &MachineFit::memory_GBps,      &MachineFit::reduce_in_place_GBps};
  for (int i = 0; i < sittings; ++i) {
    MachineFit again;
    again.last_level_bytes = fit.last_level_bytes;
    again.core_cache_bytes = fit.core_cache_bytes;
    again.cache_bytes = fit.cache_bytes;
    again.peer_read_GBps = measure_peer_read(quick);
    measure_rates(again, quick);
    measure_shared_lines(again, quick);
    measure_memory(again, quick);
    for (const auto rate : kRates) fit.*rate = std::max(fit.*rate, again.*rate);
  }
}

// Every core copying slice by slice, up to buffers whose memory (both sides, all cores) is 1 GiB:
// past any last level a VM's sysfs names here (480 MiB), within what a small machine has to spare.
SlicedCopies measure_sliced(std::size_t core_cache, bool quick) {
  const int cores = copying_cores();
  const std::size_t most =
      quick ? std::size_t{4} << 20
            : std::min(std::size_t{256} << 20,
                       (std::size_t{512} << 20) / static_cast<std::size_t>(cores));
  const std::size_t least = std::max(std::size_t{1} << 20, core_cache);
  return measure_sliced_copies(cores, std::min(least, most), most, quick ? 1 : 3);
}

Profile profile_of(const MachineFit& fit) {
  Profile p = default_profile();
  std::time_t now = std::time(nullptr);
  char date[32];
  std::strftime(date, sizeof date, "%Y-%m-%d %H:%M", std::localtime(&now));
  p.name = "this machine: shm within a host, " + fit.tcp.transport + " between hosts";
  p.source = std::string("ringlet model fit, ") + date;
  p.intra = fit.shm.cost;
  p.inter = fit.tcp.cost;
  p.nic_GBps = fit.tcp.cost.bandwidth_GBps;
  p.nics_per_host = 1;
  p.intra.copies = p.inter.copies = true;  // shm and tcp: the ranks' CPUs copy every byte
  // tcp's CPUs copy into and out of the kernel's socket buffers (the wire between hosts may be
  // slower); the shm link's copies are the link.
  p.inter.cpu_GBps = fit.tcp_cpu_GBps;
  // Loopback's time per byte depends on the message's size: its measured times by size. Not so
  // for a link between hosts, whose short messages (a shaped link's burst) move faster than a
  // stream of them does.
  if (fit.tcp.transport == "tcp loopback") {
    for (const Sample& s : fit.tcp.samples)
      p.inter.by_size.push_back({s.bytes, s.one_way_us, s.exchange_us});
  }
  // shm's too: its copies of a whole message cost what its exchanges of that size measure.
  for (const Sample& s : fit.shm.samples)
    p.intra.by_size.push_back({s.bytes, s.one_way_us, s.exchange_us});
  p.intra.one_cpu_us = fit.one_cpu;
  p.intra.one_cpu_four_us = fit.one_cpu_four;
  p.intra.two_cpus_four_us = fit.two_cpus_four;
  p.intra.in_place_bytes = transport::kShmInlineBytes;    // what shm sends at once
  p.intra.waiter_bytes = transport::kShmWaiterRecvBytes;  // what its receiver reads itself
  p.inter.one_cpu_us = fit.tcp_one_cpu;
  p.inter.one_cpu_four_us = fit.tcp_one_cpu_four;
  p.inter.two_cpus_four_us = fit.tcp_two_cpus_four;
  p.cores_per_host = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  p.wakeup_us = fit.wakeup_us;
  p.reduce_GBps = fit.reduce_GBps;
  p.reduce_in_place_GBps = fit.reduce_in_place_GBps;
  p.copy_GBps = fit.copy_GBps;
  p.peer_read_GBps = fit.peer_read_GBps;
  p.cache_bytes = fit.cache_bytes;
  p.memory_GBps = fit.cache_bytes > 0 ? fit.memory_GBps : 0;
  p.last_level_bytes = profile_last_level_bytes(fit.sliced, fit.last_level_bytes);
  p.past_last_level_GBps = fit.sliced.past_GBps;
  p.core_cache_bytes = fit.core_cache_bytes;
  p.cached_copy_GBps = fit.cached_copy_GBps;
  p.cached_reduce_GBps = fit.cached_reduce_GBps;
  p.shared_write_GBps = fit.shared_write_GBps;
  p.shared_read_GBps = fit.shared_read_GBps;
  p.shared_write_past_GBps = fit.shared_write_past_GBps;
  return p;
}

}  // namespace

std::size_t past_core_cache_bytes(std::size_t core_cache, std::size_t cache) {
  std::size_t bytes = core_cache > 0 ? 2 * core_cache : std::size_t{1} << 20;
  if (cache > 0) bytes = std::min(bytes, cache / 3);
  return std::max<std::size_t>(bytes, 4096);
}

std::size_t in_place_reduce_bytes(std::size_t core_cache) {
  return core_cache > 0 ? 4 * core_cache : std::size_t{4} << 20;
}

std::size_t copies_cache_bytes(const std::vector<Sample>& shm, std::size_t last_level) {
  std::size_t fits = 512 << 10;
  for (const Sample& s : shm) {
    if (s.bytes < (1u << 20)) continue;
    if (s.exchange_us <= 1.5 * s.one_way_us) {
      fits = s.bytes;
      continue;
    }
    const std::size_t touched = 2 * 3 * fits;
    return last_level > 0 ? std::min(last_level, touched) : touched;
  }
  return last_level;
}

std::size_t profile_last_level_bytes(const SlicedCopies& sliced, std::size_t named) {
  return sliced.last_level_bytes > 0 ? sliced.last_level_bytes : named;
}

namespace {

// One whole fit, the CPUs' round trip probed before it and after each of its parts.
MachineFit fit_once(const FitOptions& options) {
  MachineFit fit;
  const int sittings = options.quick ? 1 : 3;
  fit.cpus.probe();
  LinkFit loopback;  // tcp between two ranks of this machine
  if (options.between_ranks) {
    fit.tcp = measure_job_link(sittings, options.quick, fit.rank);
    if (fit.rank != 0) return fit;  // rank 0 measures the rest
    loopback = measure_link("tcp", kSizes, false, sittings, options.quick);
  } else {
    fit.tcp = measure_link("tcp", kSizes, false, sittings, options.quick);
    loopback = fit.tcp;
  }
  fit.shm = measure_link("shm", kSizes, false, sittings, options.quick);
  fit.shm.cost = fit_link(fit.shm.samples);
  fit.tcp.cost = fit_link(fit.tcp.samples);
  fit.cpus.probe();
  measure_wakeup(fit, !options.between_ranks, sittings, options.quick);
  const Caches caches = read_caches();
  fit.last_level_bytes = caches.last_level;
  fit.caches_from = caches.source;
  fit.cache_bytes = copies_cache_bytes(fit.shm.samples, caches.last_level);
  fit.core_cache_bytes = caches.own;
  measure_host_rates(fit, sittings, options.quick);
  fit.cpus.probe();
  fit.sliced = measure_sliced(fit.core_cache_bytes, options.quick);
  fit.tcp_cpu_GBps = cpu_share_GBps(loopback.samples, fit.copy_GBps);
  fit.profile = profile_of(fit);
  fit.profile.op_us = measure_op_us(fit.profile, options.quick ? 64 : 3200, sittings);
  fit.cpus.probe();
  if (!fit.cpus.round_trips_ns.empty()) {
    fit.profile.source += "; the CPUs' round trip " + fit.cpus.range();
  }
  return fit;
}

}  // namespace

MachineFit fit_machine(const FitOptions& options) {
  // A launched job's two ranks would have to agree on fitting again: one fit there.
  const int attempts = options.between_ranks ? 1 : std::max(1, options.attempts);
  for (int attempt = 1;; ++attempt) {
    MachineFit fit = fit_once(options);
    if (!fit.cpus.moved() || attempt == attempts) return fit;
    core::log(core::LogLevel::warn, "model fit: the round trip between its two CPUs moved (",
              fit.cpus.range(), ") while it ran: the host moved them, and the figures would mix ",
              "two placements; fitting again (", attempt + 1, " of ", attempts, ")");
  }
}

namespace {

// One line of the report, or part of one, printf-formatted.
template <typename... Values>
void put(std::ostream& out, const char* format, Values... values) {
  char line[160];
  std::snprintf(line, sizeof line, format, values...);
  out << line;
}

// The links: each size's times, the fitted latency and bandwidth, tcp's CPU share.
void report_messages(std::ostream& out, const MachineFit& fit) {
  out << "# a message between two ranks, us (means): one way (half a ping-pong), and an\n"
         "# exchange (both send and receive it at once); tcp: "
      << fit.tcp.transport << "\n";
  out << "#      bytes    shm one-way   shm exchange    tcp one-way   tcp exchange\n";
  for (std::size_t k = 0; k < fit.shm.samples.size(); ++k) {
    const Sample &a = fit.shm.samples[k], &b = fit.tcp.samples[k];
    put(out, " %10zu %14.2f %14.2f %14.2f %14.2f\n", a.bytes, a.one_way_us, a.exchange_us,
        b.one_way_us, b.exchange_us);
  }
  put(out, "# shm: %.2f us + bytes / %.2f GB/s; tcp: %.2f us + bytes / %.2f GB/s\n",
      fit.shm.cost.latency_us, fit.shm.cost.bandwidth_GBps, fit.tcp.cost.latency_us,
      fit.tcp.cost.bandwidth_GBps);
  put(out,
      "# tcp loopback, the CPUs' share of a message (what an exchange takes beyond one way): "
      "%.2f GB/s\n",
      fit.tcp_cpu_GBps);
}

// The host: one thread's rates, the memory, the caches and the lines cores share.
void report_host(std::ostream& out, const MachineFit& fit) {
  put(out,
      "# past a core's own cache (%zu KiB outputs), one thread: reduction (float32 sum) "
      "%.2f GB/s, copy %.2f GB/s\n",
      past_core_cache_bytes(fit.core_cache_bytes, fit.cache_bytes) >> 10, fit.reduce_GBps,
      fit.copy_GBps);
  put(out, "# in place, of a 64 KiB slice it holds, over %zu KiB: reduction %.2f GB/s\n",
      in_place_reduce_bytes(fit.core_cache_bytes) >> 10, fit.reduce_in_place_GBps);
  put(out, "# a read of a peer's memory (cross-memory attach): %.2f GB/s\n", fit.peer_read_GBps);
  put(out, "# memory, every core copying at once: %.2f GB/s; last-level cache: %zu MiB (%s)\n",
      fit.memory_GBps, fit.last_level_bytes >> 20,
      fit.caches_from.empty() ? "unknown" : fit.caches_from.c_str());
  put(out,
      "# the cache the copies find (two ranks' largest shm exchange at most 1.5x one way): %zu "
      "KiB\n",
      fit.cache_bytes >> 10);
  if (!fit.sliced.rates.empty()) {
    put(out, "# every core copying slice by slice: %.2f GB/s (%zu MiB each)",
        fit.sliced.rates.front().GBps, fit.sliced.rates.front().per_core_bytes >> 20);
    if (fit.sliced.last_level_bytes > 0) {
      put(out, "; the last level they find: %zu MiB; past it %.2f GB/s\n",
          fit.sliced.last_level_bytes >> 20, fit.sliced.past_GBps);
    } else {
      put(out,
          "; %.2f GB/s at %zu MiB each: no last level seen (the profile's: %zu MiB, the "
          "machine's)\n",
          fit.sliced.rates.back().GBps, fit.sliced.rates.back().per_core_bytes >> 20,
          fit.last_level_bytes >> 20);
    }
  }
  put(out, "# within a core's own %zu KiB cache: reduction %.2f GB/s, copy %.2f GB/s\n",
      fit.core_cache_bytes >> 10, fit.cached_reduce_GBps, fit.cached_copy_GBps);
  put(out, "# 64 KiB another core's cache holds: written at %.2f GB/s, read at %.2f GB/s\n",
      fit.shared_write_GBps, fit.shared_read_GBps);
  if (fit.shared_write_past_GBps > 0) {
    put(out, "# %zu KiB another core read (past its cache): written at %.2f GB/s\n",
        (fit.core_cache_bytes > 0 ? 4 * fit.core_cache_bytes : std::size_t{4} << 20) >> 10,
        fit.shared_write_past_GBps);
  }
}

// Ranks taking turns on one CPU, where the fit's CPUs sat, the communicator's work per op.
void report_turns(std::ostream& out, const MachineFit& fit) {
  put(out, "# both ranks on one CPU: 8 bytes over shm take %.2f us one way: a wake-up of %.2f us\n",
      fit.one_cpu, fit.wakeup_us);
  if (fit.tcp_one_cpu > 0) {
    put(out, "# both ranks on one CPU: 8 bytes over tcp loopback take %.2f us one way\n",
        fit.tcp_one_cpu);
  }
  put(out, "# four ranks on one CPU: 8 bytes around their ring take %.2f us a hop over shm",
      fit.one_cpu_four);
  if (fit.tcp_one_cpu_four > 0) put(out, ", %.2f over tcp loopback", fit.tcp_one_cpu_four);
  out << "\n";
  if (fit.two_cpus_four > 0) {
    put(out, "# four ranks on two CPUs, two each: a hop to the other CPU takes %.2f us over shm",
        fit.two_cpus_four);
    if (fit.tcp_two_cpus_four > 0) put(out, ", %.2f over tcp loopback", fit.tcp_two_cpus_four);
    out << "\n";
  }
  if (!fit.cpus.round_trips_ns.empty()) {
    put(out, "# the round trip of a cache line between its two CPUs over the fit: %s (%s)\n",
        fit.cpus.range().c_str(),
        fit.cpus.moved() ? "they moved while it ran: its figures mix two placements"
                         : "they stayed put");
  }
  out << "# the communicator's own work per op (an 8-byte all-reduce of 2 ranks less its "
         "simulation), us:";
  for (const auto& [algorithm, us] : fit.profile.op_us) put(out, " %s %.2f", algorithm.c_str(), us);
  out << "\n";
}

}  // namespace

std::string fit_report(const MachineFit& fit) {
  std::ostringstream out;
  report_messages(out, fit);
  report_host(out, fit);
  report_turns(out, fit);
  return out.str();
}

}  // namespace ringlet::model
