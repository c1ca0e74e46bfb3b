// Rabenseifner's all-reduce: a reduce-scatter by recursive halving, then an all-gather by
// recursive doubling, over the largest power of two p <= n ranks. Each rank sends and receives
// 2 (p - 1) / p of the buffer, as the ring does, in 2 log2(p) steps instead of 2 (n - 1): the
// bandwidth of the ring with the latency of recursive doubling.
//
//   fold          n = p + rem: of the first 2 rem ranks, each even one hands its whole buffer to
//                 its odd neighbour, which reduces it and takes part as rank r / 2; the even one
//                 sits the halving and doubling out
//   halve, k = 1 .. log2(p)
//                 the partner is (new rank) ^ (p >> k); the two share a segment, split it in
//                 halves, and each sends the half the other keeps and reduces the half it keeps
//                 with what came back; after the last step a rank holds one fully reduced block
//   double, k = log2(p) .. 1
//                 the same partners in reverse: each sends its segment and receives the
//                 partner's, the segment doubling back to the whole buffer
//   unfold        each odd rank of the first 2 rem sends the result to its even neighbour
//
// A segment splits at its middle element (the lower half takes the smaller part of an odd
// count), so any count and any n run. Every message is [fingerprint | data] and is checked as it
// arrives, as in recursive doubling; over shm a halving's (and a fold's) message is reduced, and
// a doubling's (and an unfold's) copied into place, where it lies in the ring
// (ChannelContext::swap_fingerprinted, receive_fingerprinted). Host buffers only (the communicator
// runs the ring for device buffers).
#include <chrono>
#include <cstring>
#include <utility>
#include <vector>

#include "collectives/algorithms.h"
#include "collectives/reduce_kernels.h"

namespace ringlet::collectives {
namespace {

// [begin, end) in elements.
struct Segment {
  std::size_t begin = 0, end = 0;
  std::size_t size() const { return end - begin; }
  Segment lower() const { return {begin, begin + size() / 2}; }
  Segment upper() const { return {begin + size() / 2, end}; }
};

class Rabenseifner {
 public:
  Rabenseifner(const ChannelContext& ctx, const char* input, char* data, std::size_t count,
               DType dtype, ReduceOp op)
      : ctx_(ctx),
        input_(input),
        data_(data),
        count_(count),
        dtype_(dtype),
        op_(op),
        es_(core::dtype_size(dtype)),
        capacity_(fingerprinted_room(count * es_)) {}

  void run() {
    const int n = ctx_.size, r = ctx_.rank;
    in_ = ctx_.scratch_bytes(capacity_);
    p_ = 1;
    while (p_ * 2 <= n) p_ *= 2;
    rem_ = n - p_;
    const int me = r < 2 * rem_ ? fold_in(r) : r - rem_;
    if (me >= 0) {
      std::vector<Segment> kept{{0, count_}};
      for (int mask = p_ / 2; mask >= 1; mask /= 2) kept.push_back(halve(me, mask, kept.back()));
      for (int mask = 1; mask < p_; mask *= 2) {
        kept.pop_back();
        gather(me, mask, kept.back());
      }
    }
    if (r < 2 * rem_) fold_out(r);
  }

 private:
  int rank_of(int new_rank) const { return new_rank < rem_ ? 2 * new_rank + 1 : new_rank + rem_; }
  char* at(char* base, std::size_t element) const { return base + element * es_; }
  const char* mine() const { return reduced_ ? data_ : input_; }

  // Even ranks of the first 2 rem hand their buffer to the odd neighbour and sit out (-1).
  int fold_in(int r) {
    const auto start = std::chrono::steady_clock::now();
    int me = -1;
    if (r % 2 == 0) {
      ctx_.wait(send(r + 1, input_, {0, count_}), r + 1);
    } else {
      const Segment all{0, count_};
      ctx_.receive_fingerprinted(r - 1, in_, room(all), count_ * es_, es_,
                                 [&](const char* received) { reduce_received(all, received); });
      me = r / 2;
    }
    ctx_.trace(step_++, "fold", -1, r % 2 == 0 ? r + 1 : r - 1, count_ * es_, start);
    return me;
  }

  // One halving step: send the partner's half of `segment`, reduce this rank's half with the
  // partner's copy of it; returns the half kept.
  Segment halve(int me, int mask, Segment segment) {
    const auto start = std::chrono::steady_clock::now();
    const int partner = rank_of(me ^ mask);
    const bool low = (me & mask) == 0;
    const Segment keep = low ? segment.lower() : segment.upper();
    const Segment give = low ? segment.upper() : segment.lower();
    ctx_.swap_fingerprinted(
        partner, [&] { return send(partner, mine(), give); }, in_, room(keep), keep.size() * es_,
        es_, [&](const char* received) { reduce_received(keep, received); });
    ctx_.trace(step_++, "halve", -1, partner, (give.size() + keep.size()) * es_, start);
    return keep;
  }

  // One doubling step: this rank's reduced part of `whole` goes to the partner, whose part
  // comes back into place.
  void gather(int me, int mask, Segment whole) {
    const auto start = std::chrono::steady_clock::now();
    const int partner = rank_of(me ^ mask);
    const bool low = (me & mask) == 0;
    const Segment have = low ? whole.lower() : whole.upper();
    const Segment get = low ? whole.upper() : whole.lower();
    ctx_.swap_fingerprinted(
        partner, [&] { return send(partner, data_, have); }, in_, room(get), get.size() * es_, 1,
        [&](const char* received) {
          copy_within(ctx_, at(data_, get.begin), received, get.size() * es_);
        });
    ctx_.trace(step_++, "double", -1, partner, (have.size() + get.size()) * es_, start);
  }

  // The odd ranks of the first 2 rem give the result back to their even neighbour.
  void fold_out(int r) {
    const auto start = std::chrono::steady_clock::now();
    if (r % 2 == 1) {
      ctx_.wait(send(r - 1, data_, {0, count_}), r - 1);
    } else {
      ctx_.receive_fingerprinted(
          r + 1, in_, room({0, count_}), count_ * es_, 1,
          [&](const char* result) { copy_within(ctx_, data_, result, count_ * es_); });
    }
    ctx_.trace(step_++, "unfold", -1, r % 2 == 1 ? r - 1 : r + 1, count_ * es_, start);
  }

  // [fingerprint | base[segment]] to `peer`.
  transport::RequestPtr send(int peer, const char* base, Segment segment) {
    return ctx_.send_fingerprinted(peer, base + segment.begin * es_, segment.size() * es_,
                                   staging_);
  }

  std::size_t room(Segment segment) const { return fingerprinted_room(segment.size() * es_); }

  // data[segment] = mine[segment] op received (reduce_pair's operand order). From the first
  // reduction on, data holds this rank's values: every later step reads only inside the segment
  // reduced first, and the doubling writes the rest.
  void reduce_received(Segment segment, const char* received) {
    reduce_within(ctx_, at(data_, segment.begin), mine() + segment.begin * es_, received,
                  segment.size(), dtype_, op_);
    reduced_ = true;
  }

  const ChannelContext& ctx_;
  const char* input_;
  char* data_;
  std::size_t count_;
  DType dtype_;
  ReduceOp op_;
  std::size_t es_;
  // Room for a whole buffer and more: a partner that issued another op is a mismatch.
  std::size_t capacity_;
  char* in_ = nullptr;
  std::vector<char> staging_;  // a message, where the transport cannot send two pieces
  bool reduced_ = false;       // data holds this rank's values (the first reduction is done)
  int p_ = 1, rem_ = 0, step_ = 0;
};

}  // namespace

void rabenseifner_all_reduce(const ChannelContext& ctx, const char* input, char* data,
                             std::size_t count, DType dtype, ReduceOp op) {
  Rabenseifner(ctx, input, data, count, dtype, op).run();
}

}  // namespace ringlet::collectives
