// ChannelContext: the view of one channel an algorithm runs one collective's part on: the
// channel's mesh and ring neighbours, the op's deadline and fingerprint, scratch memory,
// tracing, and bookkeeping for error messages (the peer being waited on, bytes moved).
// Algorithms throw; the communicator wraps the error with this context.
#pragma once

#include <algorithm>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <exception>
#include <functional>
#include <memory>
#include <vector>

#include "collectives/buffer_space.h"
#include "collectives/fingerprint.h"
#include "collectives/trace.h"
#include "collectives/types.h"
#include "core/deadline.h"
#include "core/error.h"
#include "transport/mesh.h"

namespace ringlet::collectives {

struct ChannelContext {
  transport::Mesh* mesh = nullptr;
  // The ring an algorithm runs over: rank and size are positions in `members` (global ranks),
  // or in the whole communicator while `members` is empty. A hierarchical algorithm runs rings
  // over subsets of the ranks inside a SubRing (below); peer(), wait() and trace() take
  // positions and name global ranks.
  int rank = 0;
  int size = 1;
  std::vector<int> members;
  int channel = 0;
  Tracer* tracer = nullptr;
  std::size_t slice_bytes = 0;  // 0: each connection's preferred size (ring), 512 KiB (others)
  std::vector<char> scratch;    // reused across ops
  // The hierarchical all-reduce's pipelining unit (0: one piece), and the context of the thread
  // that runs its host ring beside the cross-host ring (made at the first such op, its scratch
  // kept across ops).
  std::size_t piece_bytes = 0;
  std::unique_ptr<ChannelContext> host_ring;
  // Shared windows (window all-reduce): windows[p] is rank p's window as mapped here (this
  // rank's own at [rank]); empty when the ranks have none. window_rounds counts the rounds run
  // over them, across ops: round k stages into half k % 2.
  std::vector<std::byte*> windows;
  std::size_t window_bytes = 0;
  std::uint64_t window_rounds = 0;
  // per op
  const char* op_name = "";
  BufferSpace* space = nullptr;  // device buffers: how to reach them; null for host buffers
  std::uint64_t seq = 0;
  core::Deadline deadline = core::Deadline::never();
  int waiting_on = -1;           // the peer of the last wait (for error messages)
  std::uint64_t bytes_done = 0;  // payload bytes sent + received in this op
  // Set by an op that completes asynchronously (send/recv): the Work finishes when this
  // request does; deferred_check returns its error, if any.
  transport::RequestPtr deferred;
  std::function<std::exception_ptr()> deferred_check;

  int global_rank(int r) const { return members.empty() ? r : members[r]; }
  transport::Connection& peer(int r) { return mesh->peer(global_rank(r)); }
  // The slice size on the link to `c`: both of its ends pick the same, as it is one transport.
  std::size_t slice_for(const transport::Connection& c) const {
    return slice_bytes != 0 ? slice_bytes : c.preferred_slice_bytes();
  }
  // One slice size for algorithms that forward slices across links (chains) or keep them in
  // cache (direct).
  std::size_t uniform_slice() const {
    return slice_bytes != 0 ? slice_bytes : transport::kDefaultSliceBytes;
  }
  int right() const { return (rank + 1) % size; }
  int left() const { return (rank + size - 1) % size; }

  // The current collective's fingerprint: its own exchange with the neighbours (ring-style
  // algorithms, settled at the first wait), and the value itself, for algorithms that carry it
  // in their own messages (recursive doubling, the first exchange round).
  FingerprintExchange fingerprint;
  Fingerprint op_fingerprint;
  // Rings over subsets of the ranks (hierarchical) check the fingerprint with their own
  // neighbours too; kept here so that a pending exchange's buffers outlive a failed op.
  FingerprintExchange sub_ring_fingerprints[2];
  // Ring passes number their trace steps from here (reset per op), so the passes of one op
  // (a hierarchical all-reduce runs three) keep distinct step numbers; and label them with
  // these phases.
  int next_step = 0;
  const char* reduce_phase = "RS";
  const char* gather_phase = "AG";

  // Throws CollectiveError naming both fingerprints when `peer`'s message shows another
  // collective (see check_message).
  void check_message(const char* message, std::size_t bytes, std::size_t expected_bytes,
                     bool starts_with_fingerprint, int peer) const {
    collectives::check_message(message, bytes, expected_bytes, starts_with_fingerprint,
                               global_rank(rank), op_fingerprint, global_rank(peer));
  }
  core::CollectiveError mismatch_error(int peer) const {
    return collectives::mismatch_error(global_rank(rank), op_fingerprint, global_rank(peer),
                                       nullptr);
  }

  void wait(const transport::RequestPtr& request, int peer_rank) {
    fingerprint.settle(deadline, &waiting_on);
    waiting_on = global_rank(peer_rank);
    request->wait(deadline);
    bytes_done += request->bytes();
  }

  char* scratch_bytes(std::size_t bytes) {
    if (scratch.size() < bytes) scratch.resize(bytes);
    return scratch.data();
  }

  void trace(int step, const char* phase, int chunk, int peer_rank, std::uint64_t bytes,
             std::chrono::steady_clock::time_point start) {
    if (tracer == nullptr || !tracer->enabled()) return;
    tracer->record(TraceEvent{op_name, seq, step, phase, chunk, global_rank(peer_rank), channel,
                              bytes, start, std::chrono::steady_clock::now()});
  }
};

// Runs the algorithms called in its scope over a subset of the ranks: `ranks` (global ranks in
// ring order, this rank among them) become positions 0..size-1, and ring passes label their
// trace steps `reduce_phase` / `gather_phase`. Restores the whole ring on exit.
class SubRing {
 public:
  SubRing(ChannelContext& ctx, const std::vector<int>& ranks, const char* reduce_phase = "RS",
          const char* gather_phase = "AG")
      : ctx_(ctx), rank_(ctx.rank), size_(ctx.size), members_(ctx.members) {
    const int me = ctx.global_rank(ctx.rank);
    const auto position = std::find(ranks.begin(), ranks.end(), me);
    RINGLET_CHECK(position != ranks.end(), Error, "rank ", me, " is not in its own sub-ring");
    ctx.members = ranks;
    ctx.size = static_cast<int>(ranks.size());
    ctx.rank = static_cast<int>(position - ranks.begin());
    ctx.reduce_phase = reduce_phase;
    ctx.gather_phase = gather_phase;
  }
  ~SubRing() {
    ctx_.members = std::move(members_);
    ctx_.rank = rank_;
    ctx_.size = size_;
    ctx_.reduce_phase = "RS";
    ctx_.gather_phase = "AG";
  }
  SubRing(const SubRing&) = delete;
  SubRing& operator=(const SubRing&) = delete;

 private:
  ChannelContext& ctx_;
  int rank_, size_;
  std::vector<int> members_;
};

// Copies between two buffers of the op (host or device, as ctx.space says); done on return.
inline void copy_within(ChannelContext& ctx, void* dst, const void* src, std::size_t bytes) {
  if (bytes == 0 || dst == src) return;
  if (ctx.space == nullptr) {
    std::memcpy(dst, src, bytes);
    return;
  }
  ctx.space->copy(dst, src, bytes);
  ctx.space->fence();
}

// Balanced split of `count` elements into `parts`: part i is [offset(i), offset(i + 1)).
inline std::size_t split_offset(std::size_t count, int parts, int i) {
  return count / parts * i + std::min<std::size_t>(i, count % parts);
}
// All parts + 1 offsets of that split.
inline std::vector<std::size_t> balanced(std::size_t count, int parts) {
  std::vector<std::size_t> offsets(parts + 1);
  for (int i = 0; i <= parts; ++i) offsets[i] = split_offset(count, parts, i);
  return offsets;
}

}  // namespace ringlet::collectives
