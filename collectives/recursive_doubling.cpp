// Recursive doubling all-reduce: log2(p) exchange-and-reduce rounds between partners
// rank ^ 2^k. For a world that is not a power of two (n = p + rem), the first 2*rem ranks fold
// pairwise first (even ranks hand their data to the odd neighbour and sit out), and get the
// result back at the end. Reduce ops are commutative, so partners compute identical results.
//
// Every message is [fingerprint | data]: the op's fingerprint rides with the data instead of
// in a message of its own, which saves a hand-off per op where latency is all that counts. A
// transport that can send the two pieces as one message (Connection::try_send_joined: shm, tcp)
// takes them as they are; otherwise they are copied into one buffer first. Over shm a message is
// checked and reduced (or, folding out, copied) where it lies in the ring
// (Connection::recv_in_place) rather than copied out first. Each rank checks every message it gets;
// the partners of all rounds connect every rank, so a rank that issued another collective is found
// by someone, and the failure reaches the rest.
#include <algorithm>
#include <chrono>
#include <cstring>

#include "collectives/algorithms.h"
#include "collectives/reduce_kernels.h"

namespace ringlet::collectives {
namespace {

constexpr std::size_t kHead = sizeof(Fingerprint);

// One rank's part: its buffers and the steps it takes.
class Doubling {
 public:
  Doubling(const ChannelContext& ctx, const char* input, char* data, std::size_t count, DType dtype,
           ReduceOp op)
      : ctx_(ctx),
        data_(data),
        count_(count),
        dtype_(dtype),
        op_(op),
        es_(core::dtype_size(dtype)),
        bytes_(count * es_),
        mine_(input),
        capacity_(fingerprinted_room(bytes_)) {}

  void run() {
    const int n = ctx_.size, r = ctx_.rank;
    out_ = ctx_.scratch_bytes(kHead + bytes_ + capacity_);  // [fp | data], then room to receive
    in_ = out_ + kHead + bytes_;
    copy_within(ctx_, out_, &ctx_.op.op_fingerprint, kHead);
    int p = 1;
    while (p * 2 <= n) p *= 2;
    const int rem = n - p;
    const int new_rank = r < 2 * rem ? fold_in(r) : r - rem;
    if (new_rank >= 0) {
      for (int mask = 1; mask < p; mask <<= 1) {
        const int partner_new = new_rank ^ mask;
        exchange(partner_new < rem ? partner_new * 2 + 1 : partner_new + rem);
      }
    }
    if (r < 2 * rem) fold_out(r);
  }

 private:
  // A world that is not a power of two: even ranks of the first 2*rem hand their data to the
  // odd neighbour and sit out the doubling (-1); the odd ones take part as rank r / 2.
  int fold_in(int r) {
    const auto start = std::chrono::steady_clock::now();
    int new_rank = -1;
    if (r % 2 == 0) {
      ctx_.wait(send_data(r + 1), r + 1);
    } else {
      ctx_.receive_fingerprinted(r - 1, in_, capacity_, bytes_, es_,
                                 [&](const char* received) { reduce_from(received); });
      new_rank = r / 2;
    }
    ctx_.trace(step_++, "RD", -1, r % 2 == 0 ? r + 1 : r - 1, bytes_, start);
    return new_rank;
  }

  // ... and get the result back at the end.
  void fold_out(int r) {
    const auto start = std::chrono::steady_clock::now();
    if (r % 2 == 1) {
      ctx_.wait(send_data(r - 1), r - 1);
    } else {
      ctx_.receive_fingerprinted(r + 1, in_, capacity_, bytes_, es_, [&](const char* result) {
        copy_within(ctx_, data_, result, bytes_);
      });
    }
    ctx_.trace(step_++, "RD", -1, r % 2 == 1 ? r - 1 : r + 1, bytes_, start);
  }

  // Over shm the partner's message is checked and reduced where it lies in the ring (types
  // aligned there), without copying it out first.
  void exchange(int partner) {
    const auto start = std::chrono::steady_clock::now();
    ctx_.swap_fingerprinted(
        partner, [&] { return send_data(partner); }, in_, capacity_, bytes_, es_,
        [&](const char* received) { reduce_from(received); });
    ctx_.trace(step_++, "RD", -1, partner, bytes_, start);
  }

  transport::RequestPtr send_data(int peer) {
    transport::Connection& to = ctx_.peer(peer);
    if (auto sent = to.try_send_joined({&ctx_.op.op_fingerprint, kHead}, {mine_, bytes_})) {
      return sent;
    }
    copy_within(ctx_, out_ + kHead, mine_, bytes_);
    return to.send(out_, kHead + bytes_);
  }

  // data = mine op received (reduce_into's operand order, so the bits are the in-place ones).
  void reduce_from(const char* received) {
    reduce_within(ctx_, data_, mine_, received, count_, dtype_, op_);
    mine_ = data_;
  }

  const ChannelContext& ctx_;
  char* data_;
  std::size_t count_;
  DType dtype_;
  ReduceOp op_;
  std::size_t es_, bytes_;
  const char* mine_;  // this rank's partial result: the input until the first reduction
  // Room for a larger message: a partner that issued another op is a mismatch, not an error.
  std::size_t capacity_;
  char* out_ = nullptr;
  char* in_ = nullptr;
  int step_ = 0;
};

}  // namespace

void rd_all_reduce(const ChannelContext& ctx, const char* input, char* data, std::size_t count,
                   DType dtype, ReduceOp op) {
  Doubling(ctx, input, data, count, dtype, op).run();
}

}  // namespace ringlet::collectives
