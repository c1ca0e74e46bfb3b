// Ring reduce-scatter and all-gather (all-reduce = both), written as NCCL's ring is: named
// primitives over chunk indices. Rank r's neighbours are r + 1 (it sends there) and r - 1 (it
// receives from there); chunk indices are taken modulo the world size (`chunk(i)`).
//
// All-reduce of n chunks, 2(n - 1) transfers per rank:
//   send(r - 1)                              this rank's own chunk r - 1 goes right
//   recv_reduce_send(r - j), j = 2 .. n - 1  add ours to what came from the left, pass it on
//   recv_reduce_copy_send(r)                 chunk r is complete here: keep it, pass it on
//   recv_copy_send(r - j), j = 1 .. n - 2    complete chunks travel once round the ring
//   recv(r + 1)                              the last one arrives
//
// A send stays in flight through the next primitive's receive, so sending chunk k overlaps
// receiving chunk k + 1 (a "step"). Each chunk moves as slices (one message each) sized as its
// link prefers; received slices land in a double buffer and are reduced while the next arrives.
// A step of one slice has nothing to overlap: its receive is awaited (the transport may move it
// on the waiting thread, shm's without a hand-off to its progress thread).
//
// Device buffers (the op's space set) are staged: the link carries host memory, so primitive t's
// chunk passes through pinned staging buffer t % 2 (what it receives, and what it sends on; the
// send of t stays in flight while t + 1 receives into the other buffer). A sent chunk is copied
// out of the device slice by slice, each slice's send overlapping the next slice's copy; received
// slices are reduced by the device's kernels straight out of the pinned double buffer, or copied
// into place, while the next slice arrives.
#include <algorithm>
#include <chrono>
#include <cstring>
#include <vector>

#include "collectives/algorithms.h"
#include "collectives/reduce_kernels.h"

namespace ringlet::collectives {
namespace {

using Clock = std::chrono::steady_clock;

std::size_t slice_count(std::size_t n, std::size_t per) {
  return std::max<std::size_t>(1, (n + per - 1) / per);
}
std::size_t slice_length(std::size_t n, std::size_t per, std::size_t k) {
  return std::min(per, n - std::min(n, k * per));
}

// One pass round the ring over `data`, split into chunks at `offsets` (n + 1 element offsets).
// This rank's own values are read from `input` (data in place): the first send and every
// reduce take them from there.
class RingPass {
 public:
  RingPass(const ChannelContext& ctx, const char* input, char* data,
           std::vector<std::size_t> offsets, DType dtype, ReduceOp op)
      : ctx_(ctx),
        data_(data),
        input_(input),
        offsets_(std::move(offsets)),
        dtype_(dtype),
        op_(op),
        es_(core::dtype_size(dtype)),
        space_(ctx.space()) {
    for (int c = 0; c + 1 < static_cast<int>(offsets_.size()); ++c) {
      chunk_bytes_ = std::max(chunk_bytes_, count(c) * es_);
    }
  }

  // The modular index: chunk i of the ring, for any integer i.
  int chunk(int i) const { return ((i % ctx_.size) + ctx_.size) % ctx_.size; }

  void send(int c) {
    next_primitive();
    post_send(c, input_);
  }
  void recv_reduce_send(int c) {
    recv_reduce(c);
    post_send(c, data_);
  }
  // The last reduce of an all-reduce: chunk c is final here, and the all-gather sends it first.
  // (data is the output, so keeping it needs no copy.)
  void recv_reduce_copy_send(int c) { recv_reduce_send(c); }
  void recv_copy_send(int c) {
    next_primitive();
    recv_copy(c);
    post_send(c, data_, space_ != nullptr);  // staged: forward the received copy as it is
  }
  void recv(int c) {
    next_primitive();
    recv_copy(c);
    finish_send();
  }
  // Reduce-scatter's last primitive: the complete chunk stays here.
  void recv_reduce(int c) {
    next_primitive();
    receive_reduced(c);
    finish_send();
  }

  // From here on, steps are traced as gathering (the ring's gather phase, "AG") instead of
  // reducing.
  void gathering() { phase_ = ctx_.gather_phase; }

 private:
  std::size_t count(int c) const { return offsets_[c + 1] - offsets_[c]; }
  char* at(char* base, int c) const { return base + offsets_[c] * es_; }
  const char* at(const char* base, int c) const { return base + offsets_[c] * es_; }

  // Device buffers: the pinned buffer of the current primitive.
  void next_primitive() {
    ++primitive_;
    if (space_ != nullptr) stage_ = space_->staging(primitive_ % 2, chunk_bytes_);
  }

  // Starts a step: chunk c of `base` goes right, slice by slice, as the link to the right
  // prefers. Device buffers go through the primitive's pinned buffer: copied out slice by
  // slice, or, when `staged`, already there.
  void post_send(int c, const char* base, bool staged = false) {
    transport::Connection& to = right_link();
    const std::size_t per = std::max<std::size_t>(1, ctx_.slice_for(to) / es_);
    const std::size_t n = count(c);
    step_start_ = Clock::now();
    sending_ = c;
    sending_bytes_ = n * es_;
    for (std::size_t k = 0; k < slice_count(n, per); ++k) {
      const std::size_t off = k * per * es_, bytes = slice_length(n, per, k) * es_;
      const char* from = at(base, c) + off;
      if (space_ != nullptr) {
        if (!staged) {
          space_->copy(stage_ + off, from, bytes);
          space_->fence();
        }
        from = stage_ + off;
      }
      sends_.push_back(to.send(from, bytes));
    }
  }
  // Ends the step: waits for the chunk in flight and records the step.
  void finish_send() {
    for (auto& s : sends_) ctx_.wait(s, ctx_.right());
    sends_.clear();
    if (sending_ >= 0) {
      ctx_.trace(ctx_.op.next_step++, phase_, sending_, ctx_.right(), sending_bytes_, step_start_);
    }
    sending_ = -1;
  }

  // Chunk c from the left straight into place (device buffers: into the primitive's pinned
  // buffer, each slice copied to the device as it arrives).
  void recv_copy(int c) {
    transport::Connection& from = left_link();
    const std::size_t per = std::max<std::size_t>(1, ctx_.slice_for(from) / es_);
    const std::size_t n = count(c);
    char* into = space_ != nullptr ? stage_ : at(data_, c);
    std::vector<transport::RequestPtr> recvs;
    const std::size_t slices = slice_count(n, per);
    for (std::size_t k = 0; k < slices; ++k) {
      recvs.push_back(receive(from, into + k * per * es_, slice_length(n, per, k) * es_, slices));
    }
    for (std::size_t k = 0; k < recvs.size(); ++k) {
      ctx_.wait(recvs[k], ctx_.left());
      check_slice(*recvs[k], slice_length(n, per, k) * es_);
      if (space_ != nullptr) {
        space_->copy(at(data_, c) + k * per * es_, into + k * per * es_,
                     slice_length(n, per, k) * es_);
      }
    }
    if (space_ != nullptr) space_->fence();
    finish_send();
  }
  // Chunk c from the left combined with ours: data[c] = own[c] op received, slice by slice
  // through a double buffer (slice k + 1 arrives while slice k is reduced).
  void receive_reduced(int c) {
    transport::Connection& from = left_link();
    const std::size_t per = std::max<std::size_t>(1, ctx_.slice_for(from) / es_);
    const std::size_t n = count(c), slices = slice_count(n, per);
    char* tmp =
        space_ != nullptr ? space_->staging(2, 2 * per * es_) : ctx_.scratch_bytes(2 * per * es_);
    const char* own = at(input_, c);
    transport::RequestPtr pending = receive(from, tmp, slice_length(n, per, 0) * es_, slices);
    for (std::size_t k = 0; k < slices; ++k) {
      transport::RequestPtr next;
      if (k + 1 < slices) {
        next = from.recv(tmp + ((k + 1) % 2) * per * es_, slice_length(n, per, k + 1) * es_);
      }
      ctx_.wait(pending, ctx_.left());
      check_slice(*pending, slice_length(n, per, k) * es_);
      char* dst = at(data_, c) + k * per * es_;
      const char *mine = own + k * per * es_, *got = tmp + (k % 2) * per * es_;
      // Device buffers: on the device, out of the pinned slice, done before it receives again.
      reduce_within(ctx_, dst, mine, got, slice_length(n, per, k), dtype_, op_);
      pending = std::move(next);
    }
  }

  // The links to the neighbours, each looked up in the mesh once per pass.
  transport::Connection& right_link() {
    if (right_link_ == nullptr) right_link_ = &ctx_.peer(ctx_.right());
    return *right_link_;
  }
  transport::Connection& left_link() {
    if (left_link_ == nullptr) left_link_ = &ctx_.peer(ctx_.left());
    return *left_link_;
  }

  // A slice of a step of `slices`: a step's only slice is awaited at once, with nothing to
  // overlap it with (Connection::recv_awaited).
  static transport::RequestPtr receive(transport::Connection& from, char* into, std::size_t bytes,
                                       std::size_t slices) {
    return slices == 1 ? from.recv_awaited(into, bytes) : from.recv(into, bytes);
  }

  // A slice of another length than this rank expects: the left neighbour cut the buffer
  // another way (a longer one the transport refuses; a shorter one would leave stale bytes).
  void check_slice(const transport::Request& got, std::size_t expected) const {
    RINGLET_CHECK(got.bytes() == expected, CollectiveError, "rank ", ctx_.global_rank(ctx_.rank),
                  " received a ", got.bytes(), "-byte slice from rank ",
                  ctx_.global_rank(ctx_.left()), " where its ring expected ", expected,
                  " bytes: the ranks cut the buffer differently (RINGLET_SLICE_BYTES and "
                  "RINGLET_HIER_PIECE_BYTES must be the same on every rank)");
  }

  const ChannelContext& ctx_;
  char* data_;
  const char* input_;  // == data_ in place
  std::vector<std::size_t> offsets_;
  DType dtype_;
  ReduceOp op_;
  std::size_t es_;
  BufferSpace* space_;           // null for host buffers
  std::size_t chunk_bytes_ = 0;  // the largest chunk
  int primitive_ = -1;
  char* stage_ = nullptr;  // device buffers: the current primitive's pinned buffer
  const char* phase_ = ctx_.reduce_phase;
  std::vector<transport::RequestPtr> sends_;  // the slices of the chunk in flight
  int sending_ = -1;                          // its index, -1 when none
  std::uint64_t sending_bytes_ = 0;
  Clock::time_point step_start_;
  transport::Connection* right_link_ = nullptr;
  transport::Connection* left_link_ = nullptr;
};

std::vector<std::size_t> blocks(std::size_t block, int n) {
  std::vector<std::size_t> off(n + 1);
  for (int i = 0; i <= n; ++i) off[i] = block * i;
  return off;
}

}  // namespace

void ring_all_reduce(const ChannelContext& ctx, const char* input, char* data, std::size_t count,
                     DType dtype, ReduceOp op) {
  const int n = ctx.size, r = ctx.rank;
  RingPass ring(ctx, input, data, balanced(count, n), dtype, op);
  ring.send(ring.chunk(r - 1));
  for (int j = 2; j <= n - 1; ++j) ring.recv_reduce_send(ring.chunk(r - j));
  ring.recv_reduce_copy_send(ring.chunk(r));
  ring.gathering();
  for (int j = 1; j <= n - 2; ++j) ring.recv_copy_send(ring.chunk(r - j));
  ring.recv(ring.chunk(r + 1));
}

void ring_reduce_scatter(const ChannelContext& ctx, const char* input, char* data,
                         std::vector<std::size_t> offsets, DType dtype, ReduceOp op) {
  const int n = ctx.size, r = ctx.rank;
  if (n == 1) {
    copy_within(ctx, data, input, offsets.back() * core::dtype_size(dtype));
    return;
  }
  RingPass ring(ctx, input, data, std::move(offsets), dtype, op);
  ring.send(ring.chunk(r - 1));
  for (int j = 2; j <= n - 1; ++j) ring.recv_reduce_send(ring.chunk(r - j));
  ring.recv_reduce(ring.chunk(r));
}

void ring_all_gather(const ChannelContext& ctx, char* data, std::vector<std::size_t> offsets,
                     DType dtype) {
  const int n = ctx.size, r = ctx.rank;
  if (n == 1) return;
  RingPass ring(ctx, data, data, std::move(offsets), dtype, ReduceOp::sum);
  ring.gathering();
  ring.send(ring.chunk(r));
  for (int j = 1; j <= n - 2; ++j) ring.recv_copy_send(ring.chunk(r - j));
  ring.recv(ring.chunk(r + 1));
}

void ring_reduce_scatter_blocks(const ChannelContext& ctx, char* data, std::size_t block,
                                DType dtype, ReduceOp op) {
  ring_reduce_scatter(ctx, data, data, blocks(block, ctx.size), dtype, op);
}

void ring_all_gather_blocks(const ChannelContext& ctx, char* data, std::size_t block, DType dtype) {
  ring_all_gather(ctx, data, blocks(block, ctx.size), dtype);
}

}  // namespace ringlet::collectives
