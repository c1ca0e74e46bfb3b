// Every rank's program in the simulation: a channel over SimConnections, a dry op, the
// algorithm's own function.
#include "model/simulate.h"

#include <sys/mman.h>

#include <algorithm>
#include <chrono>

#include "collectives/algorithms.h"
#include "collectives/dry_run.h"
#include "collectives/options.h"
#include "core/error.h"
#include "model/sim_connection.h"

namespace ringlet::model {
namespace {

using collectives::Algorithm;

// An address range no one may touch (PROT_NONE): the dry ops' buffers point into it, so a data
// step the helpers did not catch is a crash, not a silent copy.
class Placeholder {
 public:
  explicit Placeholder(std::size_t bytes) : bytes_(bytes) {
    void* p = mmap(nullptr, bytes_, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    RINGLET_CHECK(p != MAP_FAILED, OutOfMemoryError, "simulation: cannot reserve ", bytes_,
                  " bytes of address space for placeholder buffers");
    base_ = static_cast<char*>(p);
  }
  ~Placeholder() { munmap(base_, bytes_); }
  Placeholder(const Placeholder&) = delete;
  Placeholder& operator=(const Placeholder&) = delete;
  char* at(std::size_t bytes) const {
    RINGLET_CHECK(bytes <= bytes_, Error, "simulation: an algorithm asked for ", bytes,
                  " bytes of scratch, more than the ", bytes_, " reserved");
    return base_;
  }

 private:
  std::size_t bytes_;
  char* base_ = nullptr;
};

// A rank's copies and reductions cost it time on the network's clock.
class RankDryRun final : public collectives::DryRun {
 public:
  RankDryRun(VirtualNetwork& network, int rank, const Placeholder& memory)
      : network_(network), rank_(rank), memory_(memory) {}
  // Out of a message where it lies in the link (the network's reading_peer): a peer's lines.
  void copied(std::size_t bytes) override {
    if (network_.reading_peer(rank_)) return copied_from_peer(bytes);
    spend(bytes, copy_GBps());
  }
  void reduced(std::size_t bytes) override { reduce(bytes, kInPlace); }
  void reduced_apart(std::size_t bytes) override { reduce(bytes, kApart); }
  // Memory another core's cache holds moves at the shared rates (past the cache as any other
  // bytes), a reduction out of it at the slower of that and the rank's own rate.
  void published(std::size_t bytes) override {
    const Profile& p = network_.profile();
    spend(bytes, p.shared_write_GBps > 0 ? network_.shared_write_GBps(rank_) : copy_GBps());
  }
  void copied_from_peer(std::size_t bytes) override {
    const Profile& p = network_.profile();
    spend(bytes, p.shared_read_GBps > 0 ? network_.moving_GBps(rank_, p.shared_read_GBps, 1)
                                        : copy_GBps());
  }
  void reduced_from_peer(std::size_t bytes) override { reduce_from_peer(bytes, kInPlace); }
  char* placeholder(std::size_t bytes) override { return memory_.at(bytes); }

 private:
  double copy_GBps() const {
    const Profile& p = network_.profile();
    return network_.moving_GBps(rank_, p.copy_GBps, 1, p.cached_copy_GBps);
  }
  // Past the cache a reduction in place reads and writes its output (two streams of memory); one
  // into another buffer also reads the operand it takes there (three). In place, of a slice it
  // holds, at its own rate where the profile gives one (profile.h).
  static constexpr int kInPlace = 2, kApart = 3;
  double reduce_GBps(int streams) const {
    const Profile& p = network_.profile();
    const bool own = streams == kInPlace && p.reduce_in_place_GBps > 0;
    return network_.moving_GBps(rank_, own ? p.reduce_in_place_GBps : p.reduce_GBps, streams,
                                p.cached_reduce_GBps, own);
  }
  void reduce(std::size_t bytes, int streams) {
    if (network_.reading_peer(rank_)) return reduce_from_peer(bytes, streams);
    spend(bytes, reduce_GBps(streams));
  }
  void reduce_from_peer(std::size_t bytes, int streams) {
    const Profile& p = network_.profile();
    const double own = reduce_GBps(streams);
    spend(bytes, p.shared_read_GBps > 0
                     ? std::min(own, network_.moving_GBps(rank_, p.shared_read_GBps))
                     : own);
  }
  void spend(std::size_t bytes, double GBps) {
    network_.spend(rank_, static_cast<double>(bytes) / (GBps * 1e9));
  }

  VirtualNetwork& network_;
  int rank_;
  const Placeholder& memory_;
};

collectives::OpKind op_kind(Collective c) {
  switch (c) {
    case Collective::all_reduce: return collectives::OpKind::all_reduce;
    case Collective::all_gather: return collectives::OpKind::all_gather;
    case Collective::reduce_scatter: return collectives::OpKind::reduce_scatter;
  }
  return collectives::OpKind::all_reduce;
}

// The elements per rank's block (all-gather, reduce-scatter) or of the buffer (all-reduce).
std::size_t elements(const SimCase& c) {
  const std::size_t es = sizeof(float), total = (c.bytes + es - 1) / es;
  if (c.collective == Collective::all_reduce) return total;
  const auto n = static_cast<std::size_t>(c.shape.ranks);
  return (total + n - 1) / n;
}

// The algorithm's own function on this rank's channel, as the communicator calls it.
// An all-reduce reads its input from `input` (== data in place).
void run_algorithm(const collectives::ChannelContext& ctx, const SimCase& c, const char* input,
                   char* data, std::size_t count, const collectives::Windows& windows) {
  const auto f32 = collectives::DType::f32;
  const auto sum = collectives::ReduceOp::sum;
  if (ctx.size == 1) return;
  switch (c.collective) {
    case Collective::all_reduce:
      if (c.algorithm == Algorithm::ring) return ring_all_reduce(ctx, input, data, count, f32, sum);
      if (c.algorithm == Algorithm::recursive_doubling) {
        return rd_all_reduce(ctx, input, data, count, f32, sum);
      }
      if (c.algorithm == Algorithm::rabenseifner) {
        return rabenseifner_all_reduce(ctx, input, data, count, f32, sum);
      }
      if (c.algorithm == Algorithm::tree) return tree_all_reduce(ctx, input, data, count, f32, sum);
      if (c.algorithm == Algorithm::direct) {
        return direct_all_reduce(ctx, input, data, count, f32, sum);
      }
      if (c.algorithm == Algorithm::window) {
        return window_all_reduce(ctx, windows, input, data, count, f32, sum);
      }
      break;
    case Collective::all_gather:
      if (c.algorithm == Algorithm::ring) return ring_all_gather_blocks(ctx, data, count, f32);
      if (c.algorithm == Algorithm::bruck) return bruck_all_gather(ctx, data, count, f32);
      if (c.algorithm == Algorithm::doubling) return doubling_all_gather(ctx, data, count, f32);
      break;
    case Collective::reduce_scatter:
      if (c.algorithm == Algorithm::ring) {
        return ring_reduce_scatter_blocks(ctx, data, count, f32, sum);
      }
      if (c.algorithm == Algorithm::halving) {
        return halving_reduce_scatter(ctx, data, data, count, f32, sum);
      }
      break;
  }
  RINGLET_THROW(ValueError, "simulation: ", collective_name(c.collective), " has no algorithm ",
                collectives::algorithm_name(c.algorithm), " to simulate");
}

}  // namespace

const char* collective_name(Collective collective) {
  switch (collective) {
    case Collective::all_reduce: return "all_reduce";
    case Collective::all_gather: return "all_gather";
    case Collective::reduce_scatter: return "reduce_scatter";
  }
  return "?";
}

Collective parse_collective(const std::string& text) {
  for (const Collective c :
       {Collective::all_reduce, Collective::all_gather, Collective::reduce_scatter}) {
    if (text == collective_name(c)) return c;
  }
  RINGLET_THROW(ValueError, "'", text, "' is not a collective the model simulates (all_reduce, ",
                "all_gather, reduce_scatter)");
}

std::vector<Algorithm> simulated_algorithms(Collective collective) {
  switch (collective) {
    case Collective::all_reduce:
      return {Algorithm::ring, Algorithm::tree, Algorithm::rabenseifner,
              Algorithm::recursive_doubling};
    case Collective::all_gather: return {Algorithm::ring, Algorithm::bruck, Algorithm::doubling};
    case Collective::reduce_scatter: return {Algorithm::ring, Algorithm::halving};
  }
  return {};
}

std::vector<Algorithm> simulated_algorithms(Collective collective, const NetworkShape& shape,
                                            const Profile& profile) {
  std::vector<Algorithm> algorithms = simulated_algorithms(collective);
  if (collective == Collective::all_reduce && shape.hosts() == 1 && profile.intra.copies) {
    algorithms.push_back(Algorithm::direct);
    algorithms.push_back(Algorithm::window);
  }
  return algorithms;
}

double bus_bandwidth_GBps(Collective collective, int ranks, std::size_t bytes, double seconds) {
  if (seconds <= 0) return 0;
  const double n = ranks;
  const double factor = collective == Collective::all_reduce ? 2 * (n - 1) / n : (n - 1) / n;
  return static_cast<double>(bytes) / seconds * factor / 1e9;
}

SimResult simulate(const SimCase& c, const Profile& profile) {
  const auto wall_start = std::chrono::steady_clock::now();
  const int n = c.shape.ranks;
  const std::size_t count = elements(c);
  const std::size_t buffer =
      count * sizeof(float) * (c.collective == Collective::all_reduce ? 1 : n);
  // The buffer, the algorithms' scratch (at most a buffer and a message more), the ring's two
  // slices and the windows.
  const std::size_t window_bytes = collectives::default_window_bytes(n);
  Placeholder memory(4 * buffer + 2 * profile.slice_bytes + window_bytes + (std::size_t{1} << 20));
  collectives::Windows windows;
  if (c.algorithm == Algorithm::window) {
    windows.mapped.assign(static_cast<std::size_t>(n),
                          reinterpret_cast<std::byte*>(memory.at(window_bytes)));
    windows.bytes = window_bytes;
  }
  // The output at the start of the reserved range, an out-of-place all-reduce's input after it.
  char* const data = memory.at(buffer);
  const char* const input = c.in_place ? data : memory.at(2 * buffer) + buffer;
  VirtualNetwork network(c.shape, profile);
  network.set_buffer_bytes(buffer);
  std::vector<std::unique_ptr<transport::Mesh>> meshes;
  const auto* in_place = reinterpret_cast<const std::byte*>(memory.at(0));
  for (int r = 0; r < n; ++r) {
    meshes.push_back(transport::Mesh::over(r, n, [&network, r, in_place](int peer) {
      return std::make_unique<SimConnection>(network, r, peer, in_place);
    }));
  }
  const collectives::Fingerprint fp{
      op_kind(c.collective), collectives::DType::f32, collectives::ReduceOp::sum, 0, -1, count, 0};
  SimResult result;
  result.seconds = network.run([&](int rank) {
    collectives::ChannelConfig config{meshes[static_cast<std::size_t>(rank)].get(), 0, nullptr, 0};
    collectives::OpState op;
    op.begin(op_kind(c.collective), fp, core::Deadline::never(), std::chrono::milliseconds(0));
    RankDryRun dry(network, rank, memory);
    op.dry = &dry;
    collectives::AlgorithmStates states;
    const collectives::ChannelContext ctx(config, op, states, rank, n);
    // The communicator's own work before the algorithm's first step (profile.h, op_us); one
    // rank runs no algorithm.
    if (n > 1) network.spend(rank, profile.op_seconds(collectives::algorithm_name(c.algorithm)));
    // As the communicator runs an op: a ring's fingerprint goes to its neighbours first, in a
    // message of its own, and is settled at the algorithm's first wait (or after it).
    if (n > 1 && collectives::checks_fingerprint_apart(c.algorithm)) {
      op.fingerprint.post(ctx.peer(ctx.left()), ctx.peer(ctx.right()), fp, rank, ctx.left(),
                          ctx.right(), {}, true);
    }
    run_algorithm(ctx, c, input, data, count, windows);
    op.fingerprint.settle(op.deadline, &op.waiting_on);
  });
  result.bytes = buffer;
  result.messages = network.messages();
  result.bytes_sent = network.bytes();
  result.turns_passed = network.turns_passed();
  result.wall_seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - wall_start).count();
  return result;
}

}  // namespace ringlet::model
