// Reduce-scatter by recursive halving and all-gather by recursive doubling, the two halves of
// Rabenseifner's all-reduce run on their own over equal blocks: log2(p) steps each, where the
// ring takes n - 1, moving the ring's bytes.
//
// Any n = p + rem (p the largest power of two <= n): the first 2 rem ranks pair up, the odd one
// of each pair standing in for both in the power-of-two part as new rank r / 2, the even one
// sitting it out. New rank g owns a group of blocks, contiguous in block order: {2g, 2g + 1} for
// g < rem (the pair's blocks), {g + rem} after. Halving and doubling split and join groups.
//
// Reduce-scatter (result: block r of `data` holds block r reduced over every rank):
//   fold     each even rank of the first 2 rem sends its whole input to its odd neighbour,
//            which reduces it into its own
//   halve    mask = p/2 .. 1: the partner is (new rank) ^ mask; the two hold the same range of
//            groups, each sends the half of it the other keeps and reduces the half it keeps
//   unfold   each odd rank of the first 2 rem sends its even neighbour that rank's block
// All-gather (block r of `data` is rank r's on entry, every block is in place on return):
//   fold     each even rank of the first 2 rem sends its block to its odd neighbour
//   double   mask = 1 .. p/2: the partner is (new rank) ^ mask; each sends the groups it holds
//            and receives the partner's, the range doubling back to all n blocks
//   unfold   each odd rank of the first 2 rem sends its even neighbour the whole result
//
// Every message is [fingerprint | blocks] and is checked as it arrives; over shm every message
// (a halving's or a fold's reduced, the others copied into place) is used where it lies in the
// ring (ChannelContext::swap_fingerprinted, receive_fingerprinted). Host buffers.
#include <chrono>
#include <cstring>
#include <vector>

#include "collectives/algorithms.h"
#include "collectives/reduce_kernels.h"

namespace ringlet::collectives {
namespace {

// A range of blocks [begin, end).
struct Blocks {
  std::size_t begin = 0, end = 0;
  std::size_t size() const { return end - begin; }
};
// Blocks of a buffer to send.
struct Out {
  const char* base = nullptr;
  Blocks blocks;
};

class HalvingDoubling {
 public:
  HalvingDoubling(const ChannelContext& ctx, char* data, std::size_t block, DType dtype)
      : ctx_(ctx),
        data_(data),
        block_bytes_(block * core::dtype_size(dtype)),
        count_(block),
        dtype_(dtype),
        capacity_(fingerprinted_room(ctx.size * block_bytes_)) {
    while (p_ * 2 <= ctx.size) p_ *= 2;
    rem_ = ctx.size - p_;
    const int r = ctx.rank;
    me_ = r < 2 * rem_ ? (r % 2 == 1 ? r / 2 : -1) : r - rem_;
    in_ = ctx.scratch_bytes(capacity_);
  }

  void reduce_scatter(const char* input, ReduceOp op) {
    const int r = ctx_.rank;
    const Blocks all{0, static_cast<std::size_t>(ctx_.size)};
    source_ = input;
    if (r < 2 * rem_ && r % 2 == 0) {
      give("fold", r + 1, Out{input, all});
    } else if (r < 2 * rem_) {
      take("fold", r - 1, all, core::dtype_size(dtype_),
           [&](const char* received) { reduce_received(all, op, received); });
    }
    if (me_ >= 0) {
      Blocks groups{0, static_cast<std::size_t>(p_)};
      for (int mask = p_ / 2; mask >= 1; mask /= 2) {
        const bool low = (me_ & mask) == 0;
        const Blocks lower{groups.begin, groups.begin + mask},
            upper{groups.begin + mask, groups.end};
        groups = low ? lower : upper;
        const Blocks give = blocks_of(low ? upper : lower), keep = blocks_of(groups);
        swap("halve", rank_of(me_ ^ mask), Out{source_, give}, keep, core::dtype_size(dtype_),
             [&](const char* received) { reduce_received(keep, op, received); });
      }
    }
    if (r < 2 * rem_) {
      const Blocks theirs{static_cast<std::size_t>(r - 1), static_cast<std::size_t>(r)};
      const Blocks mine{static_cast<std::size_t>(r), static_cast<std::size_t>(r + 1)};
      if (r % 2 == 1) give("unfold", r - 1, Out{data_, theirs});
      if (r % 2 == 0) {
        take("unfold", r + 1, mine, 1, [&](const char* received) { place(received, mine); });
      }
    }
  }

  void all_gather() {
    const int r = ctx_.rank;
    const Blocks all{0, static_cast<std::size_t>(ctx_.size)};
    const Blocks mine{static_cast<std::size_t>(r), static_cast<std::size_t>(r + 1)};
    if (r < 2 * rem_ && r % 2 == 0) {
      give("fold", r + 1, Out{data_, mine});
    } else if (r < 2 * rem_) {
      const Blocks theirs{static_cast<std::size_t>(r - 1), static_cast<std::size_t>(r)};
      take("fold", r - 1, theirs, 1, [&](const char* received) { place(received, theirs); });
    }
    if (me_ >= 0) {
      for (int mask = 1; mask < p_; mask *= 2) {
        const std::size_t base = static_cast<std::size_t>(me_ & ~(2 * mask - 1));
        const Blocks lower{base, base + mask}, upper{base + mask, base + 2 * mask};
        const bool low = (me_ & mask) == 0;
        const Blocks have = blocks_of(low ? lower : upper), get = blocks_of(low ? upper : lower);
        swap("double", rank_of(me_ ^ mask), Out{data_, have}, get, 1,
             [&](const char* received) { place(received, get); });
      }
    }
    if (r < 2 * rem_ && r % 2 == 1) give("unfold", r - 1, Out{data_, all});
    if (r < 2 * rem_ && r % 2 == 0) {
      take("unfold", r + 1, all, 1, [&](const char* received) { place(received, all); });
    }
  }

 private:
  int rank_of(int new_rank) const { return new_rank < rem_ ? 2 * new_rank + 1 : new_rank + rem_; }
  // The first block of new rank g's group (g = p: n).
  std::size_t first_block(std::size_t g) const {
    return static_cast<int>(g) < rem_ ? 2 * g : g + static_cast<std::size_t>(rem_);
  }
  Blocks blocks_of(Blocks groups) const {
    return {first_block(groups.begin), first_block(groups.end)};
  }
  std::size_t offset(const Blocks& b) const { return b.begin * block_bytes_; }
  std::size_t bytes(const Blocks& b) const { return b.size() * block_bytes_; }

  // A step to `peer` alone: sends `give` (blocks of a buffer) and waits for it to go.
  void give(const char* phase, int peer, Out give) {
    const auto start = std::chrono::steady_clock::now();
    ctx_.wait(ctx_.send_fingerprinted(peer, give.base + offset(give.blocks), bytes(give.blocks),
                                      staging_),
              peer);
    ctx_.trace(step_++, phase, -1, peer, bytes(give.blocks), start);
  }
  // A step from `peer` alone: hands its blocks `get`, checked, to use(payload), where they lie in
  // the transport where it can (aligned to `align` bytes there;
  // ChannelContext::receive_fingerprinted).
  template <class Use>
  void take(const char* phase, int peer, Blocks get, std::size_t align, Use use) {
    const auto start = std::chrono::steady_clock::now();
    ctx_.receive_fingerprinted(peer, in_, fingerprinted_room(bytes(get)), bytes(get), align, use);
    ctx_.trace(step_++, phase, -1, peer, bytes(get), start);
  }
  // A step each way with `peer`: sends `give`, hands its blocks `get`, checked, to
  // use(payload), where they lie in the transport where it can (aligned to `align` bytes there;
  // ChannelContext::swap_fingerprinted).
  template <class Use>
  void swap(const char* phase, int peer, Out give, Blocks get, std::size_t align, Use use) {
    const auto start = std::chrono::steady_clock::now();
    const auto send = [&] {
      return ctx_.send_fingerprinted(peer, give.base + offset(give.blocks), bytes(give.blocks),
                                     staging_);
    };
    ctx_.swap_fingerprinted(peer, send, in_, fingerprinted_room(bytes(get)), bytes(get), align,
                            use);
    ctx_.trace(step_++, phase, -1, peer, bytes(give.blocks) + bytes(get), start);
  }
  void place(const char* payload, Blocks blocks) {
    copy_within(ctx_, data_ + offset(blocks), payload, bytes(blocks));
  }
  // data[blocks] = source[blocks] op received; from the first reduction on, data is the source.
  void reduce_received(Blocks blocks, ReduceOp op, const char* received) {
    reduce_within(ctx_, data_ + offset(blocks), source_ + offset(blocks), received,
                  blocks.size() * count_, dtype_, op);
    source_ = data_;
  }

  const ChannelContext& ctx_;
  char* data_;
  std::size_t block_bytes_, count_;
  DType dtype_;
  std::size_t capacity_;  // the scratch: a whole buffer and kMismatchRoom
  char* in_ = nullptr;
  const char* source_ = nullptr;  // this rank's values: the input until the first reduction
  std::vector<char> staging_;     // a message, where the transport cannot send two pieces
  int p_ = 1, rem_ = 0, me_ = -1, step_ = 0;
};

}  // namespace

void halving_reduce_scatter(const ChannelContext& ctx, const char* input, char* data,
                            std::size_t block, DType dtype, ReduceOp op) {
  HalvingDoubling(ctx, data, block, dtype).reduce_scatter(input, op);
}

void doubling_all_gather(const ChannelContext& ctx, char* data, std::size_t block, DType dtype) {
  HalvingDoubling(ctx, data, block, dtype).all_gather();
}

}  // namespace ringlet::collectives
