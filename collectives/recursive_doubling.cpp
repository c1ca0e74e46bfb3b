// Recursive doubling all-reduce: log2(p) exchange-and-reduce rounds between partners
// rank ^ 2^k. For a world that is not a power of two (n = p + rem), the first 2*rem ranks fold
// pairwise first (even ranks hand their data to the odd neighbour and sit out), and get the
// result back at the end. Reduce ops are commutative, so partners compute identical results.
//
// Every message is [fingerprint | data]: the op's fingerprint rides with the data instead of
// in a message of its own, which saves a hand-off per op where latency is all that counts. A
// transport that can send the two pieces as one message (Connection::try_send_joined: shm when
// the ring has room at once, tcp) takes them as they are; otherwise they are copied into one
// buffer first. Over shm the partner's message is checked and reduced where it lies in the ring
// (Connection::recv_in_place) rather than copied out first.
// Each rank checks every message it gets; the partners of all rounds connect every rank, so a
// rank that issued another collective is found by someone, and the failure reaches the rest.
#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstring>

#include "collectives/algorithms.h"
#include "collectives/reduce_kernels.h"

namespace ringlet::collectives {
namespace {

constexpr std::size_t kHead = sizeof(Fingerprint);

}  // namespace

void rd_all_reduce(ChannelContext& ctx, char* data, std::size_t count, DType dtype, ReduceOp op,
                   const char* input) {
  const int n = ctx.size, r = ctx.rank;
  const std::size_t bytes = count * core::dtype_size(dtype);
  // This rank's partial result: the input until the first reduction writes data.
  const char* mine = input != nullptr ? input : data;
  if (n == 1) {
    if (mine != data && bytes > 0) std::memcpy(data, mine, bytes);
    return;
  }
  // Room for a larger message: a partner that issued another op is a mismatch, not an error.
  const std::size_t capacity = kHead + bytes + kMismatchRoom;
  char* out = ctx.scratch_bytes(kHead + bytes + capacity);  // [fp | data], then room to receive
  char* in = out + kHead + bytes;
  std::memcpy(out, &ctx.op_fingerprint, kHead);
  int step = 0;
  int partner_now = -1;  // the partner whose message reduce_in_place reads

  auto send_data = [&](int peer) {
    transport::Connection& to = ctx.peer(peer);
    if (auto sent = to.try_send_joined({&ctx.op_fingerprint, kHead}, {mine, bytes})) return sent;
    if (bytes > 0) std::memcpy(out + kHead, mine, bytes);
    return to.send(out, kHead + bytes);
  };
  // data = mine op received (reduce_into's operand order, so the bits are the in-place ones).
  auto reduce_received = [&] {
    reduce_pair(data, mine, in + kHead, count, dtype, op);
    mine = data;
  };
  // Waits for a message from `peer` and checks that it is this op's.
  auto receive = [&](const transport::RequestPtr& recv, int peer) {
    ctx.wait(recv, peer);
    ctx.check_message(in, recv->bytes(), kHead + bytes, true, peer);
  };
  // Checks the partner's message where it lies and reduces from it; declines data that is not
  // aligned for its type there (the ring packs messages of any length back to back), which is
  // then copied out as usual.
  const std::size_t align = core::dtype_size(dtype);
  const transport::Connection::InPlace reduce_in_place = [&](const std::byte* message,
                                                             std::size_t got) {
    const auto* m = reinterpret_cast<const char*>(message);
    if (reinterpret_cast<std::uintptr_t>(m + kHead) % align != 0) return false;
    ctx.check_message(m, got, kHead + bytes, true, partner_now);
    reduce_pair(data, mine, m + kHead, count, dtype, op);
    mine = data;
    return true;
  };
  auto exchange = [&](int partner) {
    const auto start = std::chrono::steady_clock::now();
    transport::Connection& link = ctx.peer(partner);
    transport::RequestPtr send;
    if (link.receives_in_place()) {
      // Sent at once (shm, room in the ring): the partner's message is reduced from where it
      // lies in the ring, without copying it out first.
      send = send_data(partner);
      partner_now = partner;
      if (send->done() && link.recv_in_place(reduce_in_place, capacity, ctx.deadline)) {
        ctx.wait(send, partner);  // done: reports its failure, if any
        ctx.trace(step++, "RD", -1, partner, bytes, start);
        return;
      }
    }
    auto recv = link.recv(in, capacity);
    if (!send) send = send_data(partner);
    receive(recv, partner);  // before the send: a transport may read only for a waiter
    ctx.wait(send, partner);
    reduce_received();
    ctx.trace(step++, "RD", -1, partner, bytes, start);
  };

  int p = 1;
  while (p * 2 <= n) p *= 2;
  const int rem = n - p;
  int new_rank;
  if (r < 2 * rem) {
    const auto start = std::chrono::steady_clock::now();
    if (r % 2 == 0) {  // hand the data to the odd neighbour, sit out the doubling
      ctx.wait(send_data(r + 1), r + 1);
      new_rank = -1;
    } else {
      receive(ctx.peer(r - 1).recv(in, capacity), r - 1);
      reduce_received();
      new_rank = r / 2;
    }
    ctx.trace(step++, "RD", -1, r % 2 == 0 ? r + 1 : r - 1, bytes, start);
  } else {
    new_rank = r - rem;
  }
  if (new_rank >= 0) {
    for (int mask = 1; mask < p; mask <<= 1) {
      const int partner_new = new_rank ^ mask;
      exchange(partner_new < rem ? partner_new * 2 + 1 : partner_new + rem);
    }
  }
  if (r < 2 * rem) {
    const auto start = std::chrono::steady_clock::now();
    if (r % 2 == 1) {
      ctx.wait(send_data(r - 1), r - 1);
    } else {
      receive(ctx.peer(r + 1).recv(in, capacity), r + 1);
      if (bytes > 0) std::memcpy(data, in + kHead, bytes);
    }
    ctx.trace(step++, "RD", -1, r % 2 == 1 ? r - 1 : r + 1, bytes, start);
  }
}

}  // namespace ringlet::collectives
