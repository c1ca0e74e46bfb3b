// Recursive doubling all-reduce: log2(p) exchange-and-reduce rounds between partners
// rank ^ 2^k. For a world that is not a power of two (n = p + rem), the first 2*rem ranks fold
// pairwise first (even ranks hand their data to the odd neighbour and sit out), and get the
// result back at the end. Reduce ops are commutative, so partners compute identical results.
#include <chrono>

#include "collectives/algorithms.h"
#include "collectives/reduce_kernels.h"

namespace ringlet::collectives {

void rd_all_reduce(ChannelContext& ctx, char* data, std::size_t count, DType dtype, ReduceOp op) {
  const int n = ctx.size, r = ctx.rank;
  if (n == 1) return;
  const std::size_t bytes = count * core::dtype_size(dtype);
  int p = 1;
  while (p * 2 <= n) p *= 2;
  const int rem = n - p;
  char* tmp = ctx.scratch_bytes(bytes);
  int step = 0;
  auto exchange = [&](int partner, bool reduce) {
    const auto start = std::chrono::steady_clock::now();
    auto recv = ctx.peer(partner).recv(reduce ? tmp : data, bytes);
    auto send = ctx.peer(partner).send(data, bytes);
    ctx.wait(send, partner);
    ctx.wait(recv, partner);
    if (reduce) reduce_into(data, tmp, count, dtype, op);
    ctx.trace(step++, "RD", -1, partner, bytes, start);
  };

  int new_rank;
  if (r < 2 * rem) {
    const auto start = std::chrono::steady_clock::now();
    if (r % 2 == 0) {  // hand the data to the odd neighbour, sit out the doubling
      ctx.wait(ctx.peer(r + 1).send(data, bytes), r + 1);
      new_rank = -1;
    } else {
      ctx.wait(ctx.peer(r - 1).recv(tmp, bytes), r - 1);
      reduce_into(data, tmp, count, dtype, op);
      new_rank = r / 2;
    }
    ctx.trace(step++, "RD", -1, r % 2 == 0 ? r + 1 : r - 1, bytes, start);
  } else {
    new_rank = r - rem;
  }
  if (new_rank >= 0) {
    for (int mask = 1; mask < p; mask <<= 1) {
      const int partner_new = new_rank ^ mask;
      const int partner = partner_new < rem ? partner_new * 2 + 1 : partner_new + rem;
      exchange(partner, true);
    }
  }
  if (r < 2 * rem) {
    const auto start = std::chrono::steady_clock::now();
    if (r % 2 == 1) {
      ctx.wait(ctx.peer(r - 1).send(data, bytes), r - 1);
    } else {
      ctx.wait(ctx.peer(r + 1).recv(data, bytes), r + 1);
    }
    ctx.trace(step++, "RD", -1, r % 2 == 1 ? r - 1 : r + 1, bytes, start);
  }
}

}  // namespace ringlet::collectives
