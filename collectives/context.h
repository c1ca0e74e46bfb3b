// ChannelContext: what an algorithm needs to run one collective's part on one channel: the
// channel's mesh, the op's deadline, scratch memory, tracing, and bookkeeping for error
// messages (the peer being waited on, bytes moved). Algorithms throw; the communicator wraps
// the error with this context.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <exception>
#include <functional>
#include <optional>
#include <vector>

#include "collectives/trace.h"
#include "collectives/types.h"
#include "core/deadline.h"
#include "core/error.h"
#include "transport/mesh.h"

namespace ringlet::collectives {

// The fingerprint exchange of the current collective: posted before the algorithm's first
// messages and checked at the algorithm's first wait, so it costs no extra round trip. Its
// message is first on both connections, so it is complete before any data of the op.
// The receive has room for a longer first message (a recursive-doubling op sends
// [fingerprint | data]), so that a neighbour that issued such an op is reported as a
// fingerprint mismatch, with its fingerprint, rather than as a transport error.
// The same room lets recursive doubling take a partner's larger message as a mismatch.
inline constexpr std::size_t kMismatchRoom = 64 * 1024;
inline constexpr std::size_t kFingerprintRoom = sizeof(Fingerprint) + kMismatchRoom;

struct PendingFingerprint {
  bool active = false;
  Fingerprint mine;
  std::vector<char> inbox = std::vector<char>(kFingerprintRoom);  // what the left neighbour sent
  transport::RequestPtr send, recv;
  std::function<void()> on_match;  // releases the other channels

  // The fingerprint the left neighbour's first message starts with, if it is long enough.
  std::optional<Fingerprint> theirs() const {
    if (!recv || recv->bytes() < sizeof(Fingerprint)) return std::nullopt;
    Fingerprint f;
    std::memcpy(&f, inbox.data(), sizeof f);
    return f;
  }
};

struct ChannelContext {
  transport::Mesh* mesh = nullptr;
  int rank = 0;
  int size = 1;
  int channel = 0;
  Tracer* tracer = nullptr;
  std::size_t slice_bytes = 0;  // 0: each connection's preferred size (ring), 512 KiB (others)
  std::vector<char> scratch;    // reused across ops
  // Shared windows (window all-reduce): windows[p] is rank p's window as mapped here (this
  // rank's own at [rank]); empty when the ranks have none. window_rounds counts the rounds run
  // over them, across ops: round k stages into half k % 2.
  std::vector<std::byte*> windows;
  std::size_t window_bytes = 0;
  std::uint64_t window_rounds = 0;
  // per op
  const char* op_name = "";
  std::uint64_t seq = 0;
  core::Deadline deadline = core::Deadline::never();
  int waiting_on = -1;           // the peer of the last wait (for error messages)
  std::uint64_t bytes_done = 0;  // payload bytes sent + received in this op
  // Set by an op that completes asynchronously (send/recv): the Work finishes when this
  // request does; deferred_check returns its error, if any.
  transport::RequestPtr deferred;
  std::function<std::exception_ptr()> deferred_check;

  transport::Connection& peer(int r) { return mesh->peer(r); }
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

  PendingFingerprint fingerprint;
  // The current collective's fingerprint, for algorithms that carry it in their own messages
  // (recursive doubling) instead of the separate exchange above.
  Fingerprint op_fingerprint;

  // Throws CollectiveError when the left neighbour issued a different collective.
  void settle_fingerprint() {
    if (!fingerprint.active) return;
    fingerprint.active = false;
    waiting_on = left();
    fingerprint.recv->wait(deadline);
    waiting_on = right();
    fingerprint.send->wait(deadline);
    if (auto mismatch = fingerprint_mismatch()) std::rethrow_exception(mismatch);
    if (fingerprint.on_match) fingerprint.on_match();
  }

  // The error for a peer whose fingerprint (or message size) shows another collective.
  core::CollectiveError mismatch_error(int peer_rank, const Fingerprint* theirs) const {
    return core::CollectiveError(
        core::str("fingerprint mismatch: rank ", peer_rank, " issued ",
                  theirs != nullptr ? to_string(*theirs) : std::string("something else"),
                  " while rank ", rank, " issued ", to_string(op_fingerprint),
                  " (every rank must issue the same collectives in the same order)"));
  }

  // The mismatch error when the left neighbour's fingerprint has arrived and differs from
  // ours; null while it has not arrived or when it matches. Used also after a failure, where
  // a mismatch is the root cause of what the transport saw next (an oversized message).
  std::exception_ptr fingerprint_mismatch() const {
    const auto& f = fingerprint;
    if (!f.recv || !f.recv->done() || f.recv->failed()) return nullptr;
    const std::optional<Fingerprint> theirs = f.theirs();
    if (f.recv->bytes() == sizeof(Fingerprint) && theirs == f.mine) return nullptr;
    return std::make_exception_ptr(mismatch_error(left(), theirs ? &*theirs : nullptr));
  }

  void wait(const transport::RequestPtr& request, int peer_rank) {
    settle_fingerprint();
    waiting_on = peer_rank;
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
    tracer->record(TraceEvent{op_name, seq, step, phase, chunk, peer_rank, channel, bytes, start,
                              std::chrono::steady_clock::now()});
  }
};

// Balanced split of `count` elements into `parts`: part i is [offset(i), offset(i + 1)).
inline std::size_t split_offset(std::size_t count, int parts, int i) {
  return count / parts * i + std::min<std::size_t>(i, count % parts);
}

}  // namespace ringlet::collectives
