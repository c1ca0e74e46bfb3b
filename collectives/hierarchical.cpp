// Hierarchical all-reduce, for ranks on h hosts with l ranks each (l >= 2, h >= 2):
//
//   1. local reduce-scatter: the l ranks of a host split the buffer into l parts and run the
//      ring reduce-scatter over their own connections (shm): local rank i ends with part i
//      summed over the host;
//   2. cross-host all-reduce: local rank i runs the ring all-reduce of part i with local rank i
//      of every other host (h ranks, one per host): part i is now summed over every rank;
//   3. local all-gather: the host's ranks gather the l finished parts.
//
// What crosses between hosts: in step 2 each rank sends 2(h-1)/h of its part, so a host sends
// 2(h-1)/h x S bytes for an S-byte buffer. A flat ring over n = h x l ranks, each host's ranks
// consecutive, sends 2(n-1)/n x S over the one ring link that leaves each host: 1.5 S against
// 1.0 S on 2 hosts x 2 ranks, so where that link is the limit the hierarchy is 1.5x faster.
// The l cross-host rings of step 2 run at once, sharing the hosts' links. Each ring checks the
// op's fingerprint with its own neighbours before any data moves; trace steps are labelled
// "local RS", "cross RS", "cross AG", "local AG".
//
// Pipelining: run one after the other, steps 1 and 3 leave the link between hosts idle (on 2
// simulated hosts, 45 of 315 ms at 64 MiB). So a host buffer larger than rings.piece_bytes is cut
// into pieces, and a second thread runs the host ring beside the cross-host ring: while piece k
// crosses between hosts, the host ring reduce-scatters piece k + 1 and gathers piece k - 1.
// Only the first reduce-scatter and the last gather are not hidden. The two rings use different
// connections (the host's peers, the other hosts'), so each thread has its own; the host ring's
// steps are traced on their own row (kHostRingLane + channel).
#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <exception>
#include <functional>
#include <mutex>
#include <thread>

#include "collectives/algorithms.h"

namespace ringlet::collectives {
namespace {

// What the hierarchical all-reduce keeps across ops on a channel: the fingerprint exchanges of
// its two rings (kept so that a pending one's buffers outlive a failed op), and the state of
// the second thread that runs the host ring of a pipelined op (its own trace row, op
// bookkeeping and scratch; made at the first such op, kept across ops).
struct HierarchicalState {
  FingerprintExchange sub_ring_fingerprints[2];
  ChannelConfig host_channel;
  OpState host_op;
  AlgorithmStates host_states;
};

// Posts the op's fingerprint to `ring`'s neighbours (the whole ring's exchange checks only the
// global ones), before any of the op's data goes to them: every rank posts the whole ring's,
// the local ring's, then the cross ring's, so each connection carries them in the order its
// receiver expects.
void post_sub_ring_fingerprint(const ChannelContext& ring, FingerprintExchange& exchange) {
  if (ring.size == 1) return;
  exchange.post(ring.peer(ring.left()), ring.peer(ring.right()), ring.op.op_fingerprint,
                ring.global_rank(ring.rank), ring.global_rank(ring.left()),
                ring.global_rank(ring.right()), {});
}

// Checks the op's fingerprint with every neighbour: the whole ring's (posted before the op), the
// host ring's and the cross ring's; a mismatch throws before any data moves. All of it on this
// thread, before a pipelined op's second one shares the host's connections.
void check_fingerprints(const ChannelContext& ctx, const HostRings& rings) {
  FingerprintExchange* exchanges = ctx.states.get<HierarchicalState>().sub_ring_fingerprints;
  post_sub_ring_fingerprint(ctx.sub_ring(rings.local), exchanges[0]);
  post_sub_ring_fingerprint(ctx.sub_ring(rings.cross), exchanges[1]);
  for (int k = 0; k < 2; ++k) exchanges[k].settle(ctx.op.deadline, &ctx.op.waiting_on);
  ctx.op.fingerprint.settle(ctx.op.deadline, &ctx.op.waiting_on);
}

// A piece of the op's buffer, split into the host's l parts: part i of it crosses between hosts
// with local rank i.
struct Piece {
  char* data;
  const char* input;  // == data in place
  std::vector<std::size_t> parts;
};

// The op's pieces, each about rings.piece_bytes (one piece when that is 0, for device buffers,
// and for a buffer smaller than two pieces); at most one per element and kMaxPieces in all, so
// that a tiny piece size costs messages, not an op that never ends.
constexpr std::size_t kMaxPieces = 1024;

std::vector<Piece> pieces_of(const ChannelContext& ctx, const HostRings& rings, const char* input,
                             char* data, std::size_t count, std::size_t es) {
  std::size_t n = 1;
  if (rings.piece_bytes > 0 && ctx.space() == nullptr && count > 0) {
    n = std::clamp<std::size_t>(count * es / rings.piece_bytes, 1, std::min(count, kMaxPieces));
  }
  const std::vector<std::size_t> at = balanced(count, static_cast<int>(n));
  const int local_ranks = static_cast<int>(rings.local.size());
  std::vector<Piece> pieces;
  for (std::size_t k = 0; k < n; ++k) {
    pieces.push_back(
        Piece{data + at[k] * es, input + at[k] * es, balanced(at[k + 1] - at[k], local_ranks)});
  }
  return pieces;
}

// The three phases of one piece, each one pass over one ring.
void reduce_over_host(const ChannelContext& host, const Piece& p, DType dtype, ReduceOp op) {
  ring_reduce_scatter(host, p.input, p.data, p.parts, dtype, op);
}
void reduce_across_hosts(const ChannelContext& across, const Piece& p, int mine, DType dtype,
                         ReduceOp op) {
  char* part = p.data + p.parts[mine] * core::dtype_size(dtype);
  ring_all_reduce(across, part, part, p.parts[mine + 1] - p.parts[mine], dtype, op);
}
void gather_over_host(const ChannelContext& host, const Piece& p, DType dtype) {
  ring_all_gather(host, p.data, p.parts, dtype);
}

// The host's ring and the ring across hosts of this rank, as views with their trace labels.
ChannelContext host_ring(const ChannelContext& ctx, const HostRings& rings) {
  return ctx.sub_ring(rings.local, "local RS", "local AG");
}
ChannelContext cross_ring(const ChannelContext& ctx, const HostRings& rings) {
  return ctx.sub_ring(rings.cross, "cross RS", "cross AG");
}

void run_in_order(const ChannelContext& ctx, const HostRings& rings, const Piece& p, int mine,
                  DType dtype, ReduceOp op) {
  const ChannelContext host = host_ring(ctx, rings);
  reduce_over_host(host, p, dtype, op);
  reduce_across_hosts(cross_ring(ctx, rings), p, mine, dtype, op);
  gather_over_host(host, p, dtype);
}

// What the two threads of a pipelined op tell each other: how many pieces the host ring has
// reduced (the cross-host ring may carry them), how many the cross-host ring has finished (the
// host ring may gather them), and the op's first failure, after which the other thread stops
// at its next wait on the board (its waits on peers end as they do, by the deadline at worst).
// A wait on the board never ends the op itself: the other thread either moves on or fails by
// the op's deadline, naming the peer it waited for. Its own limit is a backstop a little later.
class PieceBoard {
 public:
  explicit PieceBoard(core::Deadline deadline) : backstop_(backstop(deadline)) {}
  void reduced() { bump(reduced_); }
  void crossed() { bump(crossed_); }
  void await_reduced(std::size_t piece) {
    await(reduced_, piece, "the host ring to reduce-scatter piece ");
  }
  void await_crossed(std::size_t piece) {
    await(crossed_, piece, "the cross-host ring to all-reduce piece ");
  }
  // Runs one thread's side; its failure is recorded (the op's first one wins), not thrown.
  // Returns whether this side failed first.
  bool run(const std::function<void()>& side) noexcept {
    try {
      side();
    } catch (const Abandoned&) {
    } catch (...) {
      return fail(std::current_exception());
    }
    return false;
  }
  std::exception_ptr failure() {
    std::lock_guard<std::mutex> lock(mutex_);
    return failure_;
  }

 private:
  struct Abandoned {};  // the other side failed first

  static core::Deadline backstop(core::Deadline deadline) {
    constexpr std::chrono::seconds kMargin{5};
    if (deadline.at() == core::Deadline::never().at()) return deadline;
    return core::Deadline::after(deadline.remaining() + kMargin);
  }

  void bump(std::size_t& counter) {
    std::lock_guard<std::mutex> lock(mutex_);
    ++counter;
    changed_.notify_all();
  }
  void await(std::size_t& counter, std::size_t piece, const char* what) {
    std::unique_lock<std::mutex> lock(mutex_);
    const bool done = core::wait_until(changed_, lock, backstop_,
                                       [&] { return counter > piece || failure_ != nullptr; });
    if (failure_ != nullptr) throw Abandoned{};
    RINGLET_CHECK(done, TimeoutError, "timed out waiting for ", what, piece);
  }
  bool fail(std::exception_ptr error) {
    std::lock_guard<std::mutex> lock(mutex_);
    const bool first = failure_ == nullptr;
    if (first) failure_ = std::move(error);
    changed_.notify_all();
    return first;
  }

  core::Deadline backstop_;
  std::mutex mutex_;
  std::condition_variable changed_;
  std::size_t reduced_ = 0, crossed_ = 0;
  std::exception_ptr failure_;
};

// The context of the thread that runs the host ring beside this one: the channel's mesh and
// tracer (on a row of its own), the op's deadline and fingerprint (checked already), fresh
// bookkeeping, its own scratch.
ChannelContext host_ring_thread(const ChannelContext& ctx, const HostRings& rings) {
  HierarchicalState& state = ctx.states.get<HierarchicalState>();
  state.host_channel = ctx.channel;
  state.host_channel.channel = kHostRingLane + ctx.channel.channel;
  state.host_op.begin(ctx.op.kind, ctx.op.op_fingerprint, ctx.op.deadline, ctx.op.timeout);
  return host_ring(ctx, rings).moved_to(state.host_channel, state.host_op, state.host_states);
}

// The host ring's order, the same on every rank of a host: reduce-scatter piece 0; then for
// each later piece k, reduce-scatter k and gather k - 1 once it crossed; gather the last.
void host_ring_side(const ChannelContext& host, const std::vector<Piece>& pieces, PieceBoard& board,
                    DType dtype, ReduceOp op) {
  for (std::size_t k = 0; k <= pieces.size(); ++k) {
    if (k < pieces.size()) {
      reduce_over_host(host, pieces[k], dtype, op);
      board.reduced();
    }
    if (k > 0) {
      board.await_crossed(k - 1);
      gather_over_host(host, pieces[k - 1], dtype);
    }
  }
}

void cross_ring_side(const ChannelContext& across, const std::vector<Piece>& pieces, int mine,
                     PieceBoard& board, DType dtype, ReduceOp op) {
  for (std::size_t k = 0; k < pieces.size(); ++k) {
    board.await_reduced(k);
    reduce_across_hosts(across, pieces[k], mine, dtype, op);
    board.crossed();
  }
}

// The cross-host ring on this thread, the host ring on a second one; the op's first failure is
// rethrown once both ended, with the peer its thread waited on.
void run_pipelined(const ChannelContext& ctx, const HostRings& rings,
                   const std::vector<Piece>& pieces, int mine, DType dtype, ReduceOp op) {
  const ChannelContext host = host_ring_thread(ctx, rings);
  PieceBoard board(ctx.op.deadline);
  bool host_failed_first = false;
  std::thread host_thread([&] {
    host_failed_first = board.run([&] { host_ring_side(host, pieces, board, dtype, op); });
  });
  board.run([&] { cross_ring_side(cross_ring(ctx, rings), pieces, mine, board, dtype, op); });
  host_thread.join();
  ctx.op.bytes_done += host.op.bytes_done;
  if (host_failed_first) ctx.op.waiting_on = host.op.waiting_on;
  if (std::exception_ptr error = board.failure()) std::rethrow_exception(error);
}

}  // namespace

void hierarchical_all_reduce(const ChannelContext& ctx, const HostRings& rings, const char* input,
                             char* data, std::size_t count, DType dtype, ReduceOp op) {
  check_fingerprints(ctx, rings);
  const int mine = ctx.sub_ring(rings.local).rank;  // the part it carries across hosts
  const std::vector<Piece> pieces =
      pieces_of(ctx, rings, input, data, count, core::dtype_size(dtype));
  if (pieces.size() == 1) {
    run_in_order(ctx, rings, pieces.front(), mine, dtype, op);
  } else {
    run_pipelined(ctx, rings, pieces, mine, dtype, op);
  }
}

}  // namespace ringlet::collectives
