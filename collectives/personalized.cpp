// The personalized collectives, where every rank sends each peer its own block: all-to-all
// (pairwise exchange), gather and scatter (flat, through the root). Host buffers only.
//
// All-to-all, rank r of n: in step k (1 <= k < n) r sends its block for r + k and receives the
// block of r - k. Every step's receive and send are posted at once, so the n - 1 exchanges
// overlap on the n - 1 connections; no rank waits for another's step order, and each pair
// exchanges exactly one message each way (a zero-byte one when the block is empty), so message
// matching stays in step even where the ranks' split sizes disagree. A received block of
// another length than this rank expected is an error naming both ranks.
//
// Gather and scatter: the root receives (sends) one message per peer, posted at once; a peer
// sends (receives) one. The root's own block is copied.
#include <chrono>
#include <cstring>

#include "collectives/algorithms.h"

namespace ringlet::collectives {
namespace {

void copy_block(char* dst, const char* src, std::size_t bytes) {
  if (bytes > 0 && dst != src) std::memmove(dst, src, bytes);
}

// The received length against the expected one: ranks that split differently fail here.
void check_length(const ChannelContext& ctx, const transport::RequestPtr& request, int peer,
                  std::size_t expected) {
  if (request->bytes() == expected) return;
  throw core::CollectiveError(core::str(
      "rank ", ctx.global_rank(ctx.rank), ": ", ctx.op.name(), " seq ", ctx.op.seq, ": rank ",
      ctx.global_rank(peer), " sent a block of ", request->bytes(), " bytes where ", expected,
      " were expected (every rank's send sizes must match its peers' receive sizes)"));
}

}  // namespace

void pairwise_all_to_all(const ChannelContext& ctx, const std::vector<ConstBlock>& send,
                         const std::vector<Block>& recv) {
  const int n = ctx.size;
  const auto start = std::chrono::steady_clock::now();
  copy_block(recv[ctx.rank].data, send[ctx.rank].data, recv[ctx.rank].bytes);
  std::vector<transport::RequestPtr> recvs(n), sends(n);
  for (int k = 1; k < n; ++k) {
    const int to = (ctx.rank + k) % n, from = (ctx.rank - k + n) % n;
    recvs[from] = ctx.peer(from).recv(recv[from].data, recv[from].bytes);
    sends[to] = ctx.peer(to).send(send[to].data, send[to].bytes);
  }
  std::uint64_t bytes = 0;
  for (int k = 1; k < n; ++k) {
    const int to = (ctx.rank + k) % n, from = (ctx.rank - k + n) % n;
    ctx.wait(recvs[from], from);
    check_length(ctx, recvs[from], from, recv[from].bytes);
    ctx.wait(sends[to], to);
    bytes += recv[from].bytes + send[to].bytes;
  }
  ctx.trace(0, "A2A", -1, ctx.right(), bytes, start);
}

void flat_gather(const ChannelContext& ctx, ConstBlock mine, const std::vector<Block>& recv,
                 int root) {
  const auto start = std::chrono::steady_clock::now();
  if (ctx.rank != root) {
    ctx.wait(ctx.peer(root).send(mine.data, mine.bytes), root);
    ctx.trace(0, "GATHER", -1, root, mine.bytes, start);
    return;
  }
  copy_block(recv[root].data, mine.data, mine.bytes);
  std::vector<transport::RequestPtr> recvs(ctx.size);
  for (int p = 0; p < ctx.size; ++p) {
    if (p != root) recvs[p] = ctx.peer(p).recv(recv[p].data, recv[p].bytes);
  }
  for (int p = 0; p < ctx.size; ++p) {
    if (p == root) continue;
    ctx.wait(recvs[p], p);
    check_length(ctx, recvs[p], p, recv[p].bytes);
  }
  ctx.trace(0, "GATHER", -1, ctx.left(), mine.bytes * ctx.size, start);
}

void flat_scatter(const ChannelContext& ctx, const std::vector<ConstBlock>& send, Block mine,
                  int root) {
  const auto start = std::chrono::steady_clock::now();
  if (ctx.rank != root) {
    auto request = ctx.peer(root).recv(mine.data, mine.bytes);
    ctx.wait(request, root);
    check_length(ctx, request, root, mine.bytes);
    ctx.trace(0, "SCATTER", -1, root, mine.bytes, start);
    return;
  }
  copy_block(mine.data, send[root].data, mine.bytes);
  std::vector<transport::RequestPtr> sends(ctx.size);
  for (int p = 0; p < ctx.size; ++p) {
    if (p != root) sends[p] = ctx.peer(p).send(send[p].data, send[p].bytes);
  }
  for (int p = 0; p < ctx.size; ++p) {
    if (p != root) ctx.wait(sends[p], p);
  }
  ctx.trace(0, "SCATTER", -1, ctx.right(), mine.bytes * ctx.size, start);
}

}  // namespace ringlet::collectives
