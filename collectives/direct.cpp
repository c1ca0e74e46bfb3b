// Direct all-reduce through cross-memory attach, for ranks on one host whose shm connections
// can read each other's memory (transport::Connection::read_peer). Rank r owns chunk r of the
// balanced split:
//   reduce-scatter: r reads chunk r straight out of every peer's input, slice by slice into
//     scratch that stays in cache, and reduces it into its own output;
//   all-gather: r copies every peer's finished chunk straight out of that peer's output.
// Each byte crosses between processes once per phase, where the ring through shared-memory
// rings copies it in and out. Three rounds of small messages order the reads, and each carries
// the op's fingerprint-checked header in the first round:
//   1. where: every rank's input and output addresses (after the fingerprint);
//   2. reduced: a rank's chunk is final, so it may be gathered, and nobody reads any input any
//      more, so outputs may be overwritten (in place, the input is the output);
//   3. done: nobody reads this rank's memory any more, so the caller may reuse it.
// Chunk r is reduced by rank r alone, so every rank ends with identical bits.
#include <chrono>

#include "collectives/algorithms.h"
#include "collectives/exchange.h"

namespace ringlet::collectives {
namespace {

struct Where {
  Fingerprint fingerprint;
  std::uint64_t input;
  std::uint64_t output;
};

}  // namespace

void direct_all_reduce(const ChannelContext& ctx, const char* input, char* data, std::size_t count,
                       DType dtype, ReduceOp op) {
  const int n = ctx.size, r = ctx.rank;
  const std::size_t es = core::dtype_size(dtype);
  const Where mine{ctx.op.op_fingerprint, reinterpret_cast<std::uintptr_t>(input),
                   reinterpret_cast<std::uintptr_t>(data)};
  std::vector<Where> where(static_cast<std::size_t>(n));
  exchange(ctx, mine, where, true);

  // Reduce-scatter: chunk r, one slice at a time across all peers while it is in cache.
  const std::size_t begin = split_offset(count, n, r);
  const std::size_t len = split_offset(count, n, r + 1) - begin;
  char* chunk = data + begin * es;
  if (input != data) copy_within(ctx, chunk, input + begin * es, len * es);
  const std::size_t slice = std::max<std::size_t>(1, ctx.uniform_slice() / es);
  char* scratch = ctx.scratch_bytes(std::min(slice, std::max<std::size_t>(len, 1)) * es);
  std::vector<std::chrono::steady_clock::time_point> started(static_cast<std::size_t>(n));
  for (std::size_t off = 0; off < len; off += slice) {
    const std::size_t m = std::min(slice, len - off);
    for (int k = 1; k < n; ++k) {
      const int p = (r + k) % n;
      if (off == 0) started[p] = std::chrono::steady_clock::now();
      ctx.waiting_for(p);
      ctx.peer(p).read_peer(scratch, where[p].input + (begin + off) * es, m * es);
      reduce_within(ctx, chunk + off * es, chunk + off * es, scratch, m, dtype, op);
    }
  }
  ctx.op.bytes_done += len * es * static_cast<std::size_t>(n - 1);
  for (int k = 1; k < n; ++k) {
    const int p = (r + k) % n;
    if (len == 0) started[p] = std::chrono::steady_clock::now();
    ctx.trace(k - 1, "RS", r, p, len * es, started[p]);
  }
  notify_all(ctx, 2);

  // All-gather: every other chunk straight from its owner's output.
  for (int k = 1; k < n; ++k) {
    const int p = (r + k) % n;
    const auto start = std::chrono::steady_clock::now();
    const std::size_t b = split_offset(count, n, p);
    const std::size_t bytes = (split_offset(count, n, p + 1) - b) * es;
    ctx.waiting_for(p);
    if (bytes > 0) ctx.peer(p).read_peer(data + b * es, where[p].output + b * es, bytes);
    ctx.op.bytes_done += bytes;
    ctx.trace(n - 2 + k, "AG", p, p, bytes, start);
  }
  notify_all(ctx, 3);
}

}  // namespace ringlet::collectives
