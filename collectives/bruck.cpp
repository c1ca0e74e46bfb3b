// Bruck's all-gather: ceil(log2 n) steps for any n, where the ring takes n - 1. Each rank sends
// and receives (n - 1) / n of the result, as in the ring, but in far fewer, larger messages:
// latency-optimal for small blocks.
//
//   rotate in     this rank's block moves to the front: the buffer holds blocks r, r + 1, ...
//                 (mod n) in that order as they arrive, and so far only block r
//   step k        distance d = 2^k: the rank sends the first min(d, n - d) blocks it holds to
//                 rank r - d and receives as many from rank r + d, which are blocks r + d, ...:
//                 they go right after the d blocks already held
//   rotate out    the buffer holds blocks r .. r + n - 1 (mod n): rotated by r blocks, block b
//                 lands at b
//
// Every message is [fingerprint | blocks] and is checked as it arrives; over shm the blocks are
// copied into place from where they lie in the ring (ChannelContext::receive_fingerprinted). Host
// buffers.
#include <algorithm>
#include <chrono>
#include <cstring>
#include <vector>

#include "collectives/algorithms.h"

namespace ringlet::collectives {

void bruck_all_gather(const ChannelContext& ctx, char* data, std::size_t block, DType dtype) {
  const int n = ctx.size, r = ctx.rank;
  const std::size_t block_bytes = block * core::dtype_size(dtype);
  char* const end = data + n * block_bytes;
  rotate_within(ctx, data, data + r * block_bytes, end);  // rotate in
  char* in = ctx.scratch_bytes(fingerprinted_room(n * block_bytes));
  std::vector<char> staging;  // a message, where the transport cannot send two pieces
  int step = 0;
  for (int d = 1; d < n; d *= 2, ++step) {
    const auto start = std::chrono::steady_clock::now();
    const int to = (r - d + n) % n, from = (r + d) % n;
    const std::size_t bytes = std::min(d, n - d) * block_bytes;
    // The blocks received land after those sent (d blocks on, at least as many as are sent).
    auto sent = ctx.send_fingerprinted(to, data, bytes, staging);
    ctx.receive_fingerprinted(
        from, in, fingerprinted_room(n * block_bytes), bytes, 1,
        [&](const char* blocks) { copy_within(ctx, data + d * block_bytes, blocks, bytes); });
    ctx.wait(sent, to);
    ctx.trace(step, "gather", -1, from, 2 * bytes, start);
  }
  rotate_within(ctx, data, end - r * block_bytes, end);  // rotate out
}

}  // namespace ringlet::collectives
