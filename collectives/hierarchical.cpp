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
// simulated hosts, 45 of 315 ms at 64 MiB). So a host buffer larger than ctx.piece_bytes is cut
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

// Posts the op's fingerprint to `ranks`' ring neighbours (the whole ring's exchange checks only
// the global ones), before any of the op's data goes to them: every rank posts the whole ring's,
// the local ring's, then the cross ring's, so each connection carries them in the order its
// receiver expects.
void post_sub_ring_fingerprint(ChannelContext& ctx, const std::vector<int>& ranks,
                               FingerprintExchange& exchange) {
  SubRing ring(ctx, ranks);
  if (ctx.size == 1) return;
  exchange.post(ctx.peer(ctx.left()), ctx.peer(ctx.right()), ctx.op_fingerprint,
                ctx.global_rank(ctx.rank), ctx.global_rank(ctx.left()),
                ctx.global_rank(ctx.right()), {});
}

// Checks the op's fingerprint with every neighbour: the whole ring's (posted before the op), the
// host ring's and the cross ring's; a mismatch throws before any data moves. All of it on this
// thread, before a pipelined op's second one shares the host's connections.
void check_fingerprints(ChannelContext& ctx, const HostRings& rings) {
  post_sub_ring_fingerprint(ctx, rings.local, ctx.sub_ring_fingerprints[0]);
  post_sub_ring_fingerprint(ctx, rings.cross, ctx.sub_ring_fingerprints[1]);
  for (FingerprintExchange& exchange : ctx.sub_ring_fingerprints) {
    exchange.settle(ctx.deadline, &ctx.waiting_on);
  }
  ctx.fingerprint.settle(ctx.deadline, &ctx.waiting_on);
}

// A piece of the op's buffer, split into the host's l parts: part i of it crosses between hosts
// with local rank i.
struct Piece {
  char* data;
  const char* input;  // null in place
  std::vector<std::size_t> parts;
};

// The op's pieces, each about ctx.piece_bytes (one piece when that is 0, for device buffers,
// and for a buffer smaller than two pieces); at most one per element and kMaxPieces in all, so
// that a tiny piece size costs messages, not an op that never ends.
constexpr std::size_t kMaxPieces = 1024;

std::vector<Piece> pieces_of(const ChannelContext& ctx, int local_ranks, char* data,
                             const char* input, std::size_t count, std::size_t es) {
  std::size_t n = 1;
  if (ctx.piece_bytes > 0 && ctx.space == nullptr && count > 0) {
    n = std::clamp<std::size_t>(count * es / ctx.piece_bytes, 1, std::min(count, kMaxPieces));
  }
  const std::vector<std::size_t> at = balanced(count, static_cast<int>(n));
  std::vector<Piece> pieces;
  for (std::size_t k = 0; k < n; ++k) {
    pieces.push_back(Piece{data + at[k] * es, input != nullptr ? input + at[k] * es : nullptr,
                           balanced(at[k + 1] - at[k], local_ranks)});
  }
  return pieces;
}

// The three phases of one piece, each one pass over one ring (the SubRing in scope).
void reduce_over_host(ChannelContext& ctx, const Piece& p, DType dtype, ReduceOp op) {
  ring_reduce_scatter(ctx, p.data, p.parts, dtype, op, p.input);
}
void reduce_across_hosts(ChannelContext& ctx, const Piece& p, int mine, DType dtype, ReduceOp op) {
  const std::size_t es = core::dtype_size(dtype);
  ring_all_reduce(ctx, p.data + p.parts[mine] * es, p.parts[mine + 1] - p.parts[mine], dtype, op);
}
void gather_over_host(ChannelContext& ctx, const Piece& p, DType dtype) {
  ring_all_gather(ctx, p.data, p.parts, dtype);
}

void run_in_order(ChannelContext& ctx, const HostRings& rings, const Piece& p, int mine,
                  DType dtype, ReduceOp op) {
  {
    SubRing host(ctx, rings.local, "local RS", "local AG");
    reduce_over_host(ctx, p, dtype, op);
  }
  {
    SubRing across(ctx, rings.cross, "cross RS", "cross AG");
    reduce_across_hosts(ctx, p, mine, dtype, op);
  }
  SubRing host(ctx, rings.local, "local RS", "local AG");
  gather_over_host(ctx, p, dtype);
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

// The host ring's thread's context, kept by the channel's: the channel's mesh and trace (on a
// row of its own), the op's deadline and fingerprint (checked already), fresh bookkeeping.
ChannelContext& host_ring_context(ChannelContext& ctx) {
  if (!ctx.host_ring) ctx.host_ring = std::make_unique<ChannelContext>();
  ChannelContext& host = *ctx.host_ring;
  host.mesh = ctx.mesh;
  host.rank = ctx.rank;
  host.size = ctx.size;
  host.members = ctx.members;
  host.channel = kHostRingLane + ctx.channel;
  host.tracer = ctx.tracer;
  host.slice_bytes = ctx.slice_bytes;
  host.op_name = ctx.op_name;
  host.seq = ctx.seq;
  host.deadline = ctx.deadline;
  host.op_fingerprint = ctx.op_fingerprint;
  host.waiting_on = -1;
  host.bytes_done = 0;
  host.next_step = 0;
  return host;
}

// The host ring's order, the same on every rank of a host: reduce-scatter piece 0; then for
// each later piece k, reduce-scatter k and gather k - 1 once it crossed; gather the last.
void host_ring_side(ChannelContext& host, const HostRings& rings, const std::vector<Piece>& pieces,
                    PieceBoard& board, DType dtype, ReduceOp op) {
  SubRing ring(host, rings.local, "local RS", "local AG");
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

void cross_ring_side(ChannelContext& ctx, const HostRings& rings, const std::vector<Piece>& pieces,
                     int mine, PieceBoard& board, DType dtype, ReduceOp op) {
  SubRing across(ctx, rings.cross, "cross RS", "cross AG");
  for (std::size_t k = 0; k < pieces.size(); ++k) {
    board.await_reduced(k);
    reduce_across_hosts(ctx, pieces[k], mine, dtype, op);
    board.crossed();
  }
}

// The cross-host ring on this thread, the host ring on a second one; the op's first failure is
// rethrown once both ended, with the peer its thread waited on.
void run_pipelined(ChannelContext& ctx, const HostRings& rings, const std::vector<Piece>& pieces,
                   int mine, DType dtype, ReduceOp op) {
  ChannelContext& host = host_ring_context(ctx);
  PieceBoard board(ctx.deadline);
  bool host_failed_first = false;
  std::thread host_thread([&] {
    host_failed_first = board.run([&] { host_ring_side(host, rings, pieces, board, dtype, op); });
  });
  board.run([&] { cross_ring_side(ctx, rings, pieces, mine, board, dtype, op); });
  host_thread.join();
  ctx.bytes_done += host.bytes_done;
  if (host_failed_first) ctx.waiting_on = host.waiting_on;
  if (std::exception_ptr error = board.failure()) std::rethrow_exception(error);
}

}  // namespace

void hierarchical_all_reduce(ChannelContext& ctx, const HostRings& rings, char* data,
                             std::size_t count, DType dtype, ReduceOp op, const char* input) {
  if (input == data) input = nullptr;
  check_fingerprints(ctx, rings);
  const int mine = [&] {  // this rank's place in its host ring: the part it carries across
    SubRing host(ctx, rings.local);
    return ctx.rank;
  }();
  const std::vector<Piece> pieces = pieces_of(ctx, static_cast<int>(rings.local.size()), data,
                                              input, count, core::dtype_size(dtype));
  if (pieces.size() == 1) {
    run_in_order(ctx, rings, pieces.front(), mine, dtype, op);
  } else {
    run_pipelined(ctx, rings, pieces, mine, dtype, op);
  }
}

}  // namespace ringlet::collectives
