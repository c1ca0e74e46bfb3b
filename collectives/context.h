// ChannelContext: the view an algorithm runs one channel's part of a collective on. It joins
// three things with three lifetimes, none of which it owns:
// - ChannelConfig: the channel, fixed when the communicator connects (its mesh, index, tracer,
//   slice size);
// - OpState: the current op, reset as each op begins (its kind, seq, deadline, fingerprint,
//   buffers' space, and the bookkeeping its error message names: the peer waited on, bytes);
// - AlgorithmStates: what each algorithm keeps across ops (window rounds, the hierarchical
//   all-reduce's second thread, scratch memory), one object per type, each type declared in its
//   algorithm's own file;
// with the ring the algorithm runs over: rank and size are positions in `members` (global
// ranks). sub_ring() makes a new view over a subset of the ranks; the caller's is untouched.
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
#include <numeric>
#include <typeinfo>
#include <utility>
#include <vector>

#include "collectives/buffer_space.h"
#include "collectives/dry_run.h"
#include "collectives/fingerprint.h"
#include "collectives/reduce_kernels.h"
#include "collectives/trace.h"
#include "collectives/types.h"
#include "core/copy.h"
#include "core/deadline.h"
#include "core/error.h"
#include "transport/mesh.h"

namespace ringlet::collectives {

// The channel: one mesh (a connection to every peer) and how its ops are traced and sliced.
struct ChannelConfig {
  transport::Mesh* mesh = nullptr;
  int channel = 0;  // its index, the trace's row
  Tracer* tracer = nullptr;
  std::size_t slice_bytes = 0;  // 0: each connection's preferred size (ring), 512 KiB (others)
};

// The op the channel runs now. begin() resets it; the fingerprint exchange outlives a failed op
// (a receive of it may still be pending), so it is reused, never replaced.
struct OpState {
  OpKind kind = OpKind::all_reduce;
  BufferSpace* space = nullptr;  // device buffers: how to reach them; null for host buffers
  DryRun* dry = nullptr;         // set when the op runs without data (dry_run.h)
  std::uint64_t seq = 0;
  core::Deadline deadline = core::Deadline::never();
  std::chrono::milliseconds timeout{0};  // what the deadline was set from (for error messages)
  int waiting_on = -1;                   // the global rank of the last wait (for error messages)
  std::uint64_t bytes_done = 0;          // payload bytes sent + received in this op
  // Ring passes number their trace steps from here, so the passes of one op (a hierarchical
  // all-reduce runs three) keep distinct step numbers.
  int next_step = 0;
  // The op's fingerprint: its own exchange with the ring neighbours (ring-style algorithms,
  // settled at the first wait), and the value itself, for algorithms that carry it in their own
  // messages (recursive doubling, the first exchange round).
  FingerprintExchange fingerprint;
  Fingerprint op_fingerprint;
  // Set by an op that completes asynchronously (send/recv): the Work finishes when this request
  // does; deferred_check returns its error, if any.
  transport::RequestPtr deferred;
  std::function<std::exception_ptr()> deferred_check;

  void begin(OpKind op_kind, const Fingerprint& fp, core::Deadline op_deadline,
             std::chrono::milliseconds op_timeout) {
    kind = op_kind;
    space = nullptr;  // a device op's body sets it
    dry = nullptr;
    seq = fp.seq;
    deadline = op_deadline;
    timeout = op_timeout;
    waiting_on = -1;
    bytes_done = 0;
    next_step = 0;
    op_fingerprint = fp;
    deferred = nullptr;
    deferred_check = nullptr;
  }
  const char* name() const { return op_kind_name(kind); }
};

// Each algorithm's state kept across ops: one object per type, made on first use. The types are
// declared where they are used (window.cpp's rounds, hierarchical.cpp's host ring), so no
// algorithm's fields show here.
class AlgorithmStates {
 public:
  template <class T>
  T& get() {
    for (const auto& held : held_) {
      if (held->type() == typeid(T)) return static_cast<Held<T>&>(*held).value;
    }
    held_.push_back(std::make_unique<Held<T>>());
    return static_cast<Held<T>&>(*held_.back()).value;
  }

 private:
  struct Base {
    virtual ~Base() = default;
    virtual const std::type_info& type() const = 0;
  };
  template <class T>
  struct Held final : Base {
    T value{};
    const std::type_info& type() const override { return typeid(T); }
  };
  std::vector<std::unique_ptr<Base>> held_;
};

// Memory an algorithm borrows for the length of a call (received slices, staged messages).
struct Scratch {
  std::vector<char> bytes;
};

class ChannelContext {
 public:
  // The whole communicator's ring.
  ChannelContext(ChannelConfig& channel_config, OpState& op_state, AlgorithmStates& algo_states,
                 int rank_in_ring, int ring_size)
      : ChannelContext(channel_config, op_state, algo_states, rank_in_ring, all(ring_size), "RS",
                       "AG") {}

  // A view over the ranks `ranks` (global ranks in ring order, this rank among them): rank and
  // size become positions there, and ring passes label their trace steps with the two phases.
  ChannelContext sub_ring(const std::vector<int>& ranks, const char* reduce = "RS",
                          const char* gather = "AG") const {
    const int me = global_rank(rank);
    const auto position = std::find(ranks.begin(), ranks.end(), me);
    RINGLET_CHECK(position != ranks.end(), Error, "rank ", me, " is not in its own sub-ring");
    return ChannelContext(channel, op, states, static_cast<int>(position - ranks.begin()), ranks,
                          reduce, gather);
  }
  // The same ring on other channel state and op state (a second thread of one op).
  ChannelContext moved_to(ChannelConfig& other_channel, OpState& other_op,
                          AlgorithmStates& other_states) const {
    return ChannelContext(other_channel, other_op, other_states, rank, members, reduce_phase,
                          gather_phase);
  }

  ChannelConfig& channel;
  OpState& op;
  AlgorithmStates& states;
  const int rank;
  const int size;
  const std::vector<int> members;  // global ranks; members[rank] is this rank
  const char* const reduce_phase;
  const char* const gather_phase;

  int global_rank(int r) const { return members[r]; }
  transport::Connection& peer(int r) const { return channel.mesh->peer(global_rank(r)); }
  int right() const { return (rank + 1) % size; }
  int left() const { return (rank + size - 1) % size; }
  BufferSpace* space() const { return op.space; }

  // The slice size on the link to `c`: both of its ends pick the same, as it is one transport.
  std::size_t slice_for(const transport::Connection& c) const {
    return channel.slice_bytes != 0 ? channel.slice_bytes : c.preferred_slice_bytes();
  }
  // One slice size for algorithms that forward slices across links (chains) or keep them in
  // cache (direct).
  std::size_t uniform_slice() const {
    return channel.slice_bytes != 0 ? channel.slice_bytes : transport::kDefaultSliceBytes;
  }

  // Throws CollectiveError naming both fingerprints when `peer`'s message shows another
  // collective (see check_message).
  void check_message(const char* message, std::size_t bytes, std::size_t expected_bytes,
                     bool starts_with_fingerprint, int peer_rank) const {
    if (op.dry != nullptr) {
      RINGLET_CHECK(bytes == expected_bytes, CollectiveError, "rank ", global_rank(rank),
                    " received ", bytes, " bytes from rank ", global_rank(peer_rank), " in ",
                    op.name(), " seq ", op.seq, " where it expected ", expected_bytes);
      return;
    }
    collectives::check_message(message, bytes, expected_bytes, starts_with_fingerprint,
                               global_rank(rank), op.op_fingerprint, global_rank(peer_rank));
  }
  // [this op's fingerprint | payload] to `peer_rank`: as two pieces where the transport takes
  // them (try_send_joined), else copied into `staging`, which must outlive the send.
  transport::RequestPtr send_fingerprinted(int peer_rank, const char* payload, std::size_t bytes,
                                           std::vector<char>& staging) const {
    transport::Connection& to = peer(peer_rank);
    const std::size_t head = sizeof(Fingerprint);
    if (op.dry != nullptr) {
      char* message = op.dry->placeholder(head + bytes);
      if (auto sent = to.try_send_joined({message, head}, {message + head, bytes})) return sent;
      return to.send(message, head + bytes);
    }
    if (auto sent = to.try_send_joined({&op.op_fingerprint, head}, {payload, bytes})) return sent;
    staging.resize(head + bytes);
    std::memcpy(staging.data(), &op.op_fingerprint, head);
    if (bytes > 0) core::copy(staging.data() + head, payload, bytes);
    return to.send(staging.data(), staging.size());
  }
  // One message each way with `peer_rank`, each [this op's fingerprint | body]: send() posts
  // this rank's, and the peer's, its body `body_bytes` long, is checked and handed to
  // use(body). Where the transport receives such messages in place (shm, up to what it sends at
  // once) and the send went at once, use reads the body where it lies in the transport, saving
  // its copy out; otherwise (also for a body not aligned to `align` bytes there) the message is
  // received into `in` (`room` bytes), posted before the send, first.
  template <class Send, class Use>
  void swap_fingerprinted(int peer_rank, Send send, char* in, std::size_t room,
                          std::size_t body_bytes, std::size_t align, Use use) const {
    transport::RequestPtr sent;
    if (peer(peer_rank).receives_in_place(sizeof(Fingerprint) + body_bytes)) {
      sent = send();
      if (sent->done() && receive_in_place(peer_rank, room, body_bytes, align, use)) {
        wait(sent, peer_rank);  // done: reports its failure, if any
        return;
      }
    }
    auto received = peer(peer_rank).recv(in, room);
    if (!sent) sent = send();
    wait(received, peer_rank);  // before the send: a transport may read only for a waiter
    check_message(in, received->bytes(), sizeof(Fingerprint) + body_bytes, true, peer_rank);
    wait(sent, peer_rank);  // use may write what the send reads
    use(static_cast<const char*>(in + sizeof(Fingerprint)));
  }
  // `peer_rank`'s next message, [this op's fingerprint | body], its body `body_bytes` long:
  // checked and handed to use(body), where it lies in the transport where the transport receives
  // such messages in place (as above), else received into `in` (`room` bytes) first.
  template <class Use>
  void receive_fingerprinted(int peer_rank, char* in, std::size_t room, std::size_t body_bytes,
                             std::size_t align, Use use) const {
    if (peer(peer_rank).receives_in_place(sizeof(Fingerprint) + body_bytes) &&
        receive_in_place(peer_rank, room, body_bytes, align, use)) {
      return;
    }
    auto received = peer(peer_rank).recv(in, room);
    wait(received, peer_rank);
    check_message(in, received->bytes(), sizeof(Fingerprint) + body_bytes, true, peer_rank);
    use(static_cast<const char*>(in + sizeof(Fingerprint)));
  }
  // The next message from `peer_rank` where it lies, if the transport can take it so (and its
  // body is aligned to `align` bytes there): checked and handed to use(body); else false, with
  // nothing received.
  template <class Use>
  bool receive_in_place(int peer_rank, std::size_t room, std::size_t body_bytes, std::size_t align,
                        Use& use) const {
    const std::size_t head = sizeof(Fingerprint);
    const auto where_it_lies = [&](const std::byte* m, std::size_t got) {
      const auto* message = reinterpret_cast<const char*>(m);
      if (reinterpret_cast<std::uintptr_t>(message + head) % align != 0) return false;
      check_message(message, got, head + body_bytes, true, peer_rank);
      use(message + head);
      return true;
    };
    return peer(peer_rank).recv_in_place(where_it_lies, room, op.deadline);
  }
  core::CollectiveError mismatch_error(int peer_rank) const {
    return collectives::mismatch_error(global_rank(rank), op.op_fingerprint, global_rank(peer_rank),
                                       nullptr);
  }

  // Waits for a request to `peer_rank` (a position) within the op's deadline, after the op's
  // fingerprint exchange.
  void wait(const transport::RequestPtr& request, int peer_rank) const {
    op.fingerprint.settle(op.deadline, &op.waiting_on);
    op.waiting_on = global_rank(peer_rank);
    request->wait(op.deadline);
    op.bytes_done += request->bytes();
  }
  // Notes that the op now waits on `peer_rank` (a position) by other means (a peer's memory).
  void waiting_for(int peer_rank) const { op.waiting_on = global_rank(peer_rank); }

  char* scratch_bytes(std::size_t bytes) const {
    if (op.dry != nullptr) return op.dry->placeholder(bytes);
    std::vector<char>& scratch = states.get<Scratch>().bytes;
    if (scratch.size() < bytes) scratch.resize(bytes);
    return scratch.data();
  }

  void trace(int step, const char* phase, int chunk, int peer_rank, std::uint64_t bytes,
             std::chrono::steady_clock::time_point start) const {
    if (channel.tracer == nullptr || !channel.tracer->enabled()) return;
    channel.tracer->record(TraceEvent{op.name(), op.seq, step, phase, chunk, global_rank(peer_rank),
                                      channel.channel, bytes, start,
                                      std::chrono::steady_clock::now()});
  }

 private:
  ChannelContext(ChannelConfig& channel_config, OpState& op_state, AlgorithmStates& algo_states,
                 int rank_in_ring, std::vector<int> ring, const char* reduce, const char* gather)
      : channel(channel_config),
        op(op_state),
        states(algo_states),
        rank(rank_in_ring),
        size(static_cast<int>(ring.size())),
        members(std::move(ring)),
        reduce_phase(reduce),
        gather_phase(gather) {}

  static std::vector<int> all(int n) {
    std::vector<int> ranks(static_cast<std::size_t>(n));
    std::iota(ranks.begin(), ranks.end(), 0);
    return ranks;
  }
};

// A host algorithm run on a device op's pinned staging: for the scope, the op's buffers are
// host memory, so the algorithm's copies and reductions run on the host. Not so, its reductions
// would be the device's kernels reading its receive space, pageable host memory that a GPU
// cannot reach (an illegal memory access on a GPU, a DeviceError on the emulated device).
class HostBuffersScope {
 public:
  explicit HostBuffersScope(const ChannelContext& ctx)
      : op_(ctx.op), space_(std::exchange(ctx.op.space, nullptr)) {}
  ~HostBuffersScope() { op_.space = space_; }
  HostBuffersScope(const HostBuffersScope&) = delete;
  HostBuffersScope& operator=(const HostBuffersScope&) = delete;

 private:
  OpState& op_;
  BufferSpace* space_;
};

// Copies between two buffers of the op (host or device, as the op's space says); done on
// return.
inline void copy_within(const ChannelContext& ctx, void* dst, const void* src, std::size_t bytes) {
  if (bytes == 0 || dst == src) return;
  if (ctx.op.dry != nullptr) return ctx.op.dry->copied(bytes);
  if (ctx.space() == nullptr) {
    core::copy(dst, src, bytes);
    return;
  }
  ctx.space()->copy(dst, src, bytes);
  ctx.space()->fence();
}

// dst = own op src over `count` elements of the op's buffers (own == dst in place), on the host
// or the op's device; done on return.
inline void reduce_within(const ChannelContext& ctx, void* dst, const void* own, const void* src,
                          std::size_t count, DType dtype, ReduceOp op) {
  if (count == 0) return;
  if (ctx.op.dry != nullptr) {
    const std::size_t bytes = count * core::dtype_size(dtype);
    return own == dst ? ctx.op.dry->reduced(bytes) : ctx.op.dry->reduced_apart(bytes);
  }
  if (ctx.space() == nullptr) return reduce_pair(dst, own, src, count, dtype, op);
  reduce_pair(*ctx.space(), dst, own, src, count, dtype, op);
  ctx.space()->fence();
}

// std::rotate of host bytes [first, last) so that `middle` comes first.
inline void rotate_within(const ChannelContext& ctx, char* first, char* middle, char* last) {
  if (ctx.op.dry != nullptr) return ctx.op.dry->copied(static_cast<std::size_t>(last - first));
  std::rotate(first, middle, last);
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
