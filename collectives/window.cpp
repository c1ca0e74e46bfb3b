// Window all-reduce: reduce-scatter + all-gather through shared windows (transport/shm/
// window.h), for ranks on one host. Every rank has a window that all ranks map, split in two
// halves. The buffer is processed in pieces of half a window; piece k uses half k % 2:
//   1. stage: rank r copies every chunk of the piece but its own (chunk r of the balanced
//      split) from its input into its window;
//   2. round "staged";
//   3. reduce: r reduces chunk r, its own input with every peer's staged copy read straight
//      from the peer's window, into its output, and copies the result into its window;
//   4. round "reduced";
//   5. gather: r copies every other chunk q from rank q's window into its output.
// Each byte crosses between processes by plain loads (core::copy), once per phase. Two
// halves make a third round unnecessary: r stages piece k + 1 only after round "reduced" of
// piece k, so every rank has finished gathering piece k - 1 from that half. Peers never touch
// the caller's buffers, so the op is over for a rank when its own gather is. The first round
// of an op carries its fingerprint. Chunk r is reduced by rank r alone, so every rank ends
// with identical bits.
//
// Device buffers (the op's space, with the device windows it opened) run the same protocol over
// device windows that every rank opened over IPC: the copies and reductions are the device's (the
// reduction reads the peers' windows in place), and a fence precedes each round's message, so a
// peer is told only about memory the device has finished writing.
#include <algorithm>
#include <chrono>
#include <cstring>

#include "collectives/algorithms.h"
#include "collectives/exchange.h"
#include "collectives/reduce_kernels.h"
#include "core/copy.h"

namespace ringlet::collectives {
namespace {

// The cache-sized unit the reduction walks a chunk in, so the output slice stays in cache
// while every peer's copy is added to it.
constexpr std::size_t kReduceSliceBytes = 256 * 1024;

struct Staged {
  Fingerprint fingerprint;
  std::uint64_t token;
};

std::uint64_t token(std::uint64_t round, int phase) { return round * 2 + phase; }

// The rounds run over the windows, across ops: round k stages into half k % 2. Every rank runs
// the same sequence of window ops, so every rank counts the same rounds.
struct WindowRounds {
  std::uint64_t next = 0;
};

// The bytes of one piece: half a window, rounded down to 64 bytes.
std::size_t piece_bytes(std::size_t window_bytes) { return window_bytes / 2 / 64 * 64; }

// Where a copy's bytes are: the rank's own buffers, into its window (which the peers read), or
// out of a peer's window (which that peer just wrote). The dry run costs them apart.
enum class Across { none, to_peers, from_peer };

// The window's memory operations: plain loads and the host kernels, or the device's; in a dry
// run (dry_run.h), their costs.
struct WindowMemory {
  BufferSpace* space;
  DryRun* dry;
  void copy(void* dst, const void* src, std::size_t bytes, Across across) const {
    if (dry != nullptr) {
      if (bytes == 0) return;
      if (across == Across::to_peers) {
        dry->published(bytes);
      } else if (across == Across::from_peer) {
        dry->copied_from_peer(bytes);
      } else {
        dry->copied(bytes);
      }
    } else if (space != nullptr) {
      space->copy(dst, src, bytes);
    } else {
      core::copy(dst, src, bytes);
    }
  }
  // Into the rank's own buffer, out of a peer's window.
  void reduce(void* dst, const void* src, std::size_t count, DType dtype, ReduceOp op) const {
    if (dry != nullptr) {
      dry->reduced_from_peer(count * core::dtype_size(dtype));
    } else if (space != nullptr) {
      space->reduce_into(dst, src, count, dtype, op);
    } else {
      reduce_into(dst, src, count, dtype, op);
    }
  }
  void fence() const {
    if (space != nullptr) space->fence();
  }
};

}  // namespace

void window_all_reduce(const ChannelContext& ctx, const Windows& shared, const char* input,
                       char* data, std::size_t count, DType dtype, ReduceOp op) {
  const int n = ctx.size, r = ctx.rank;
  const std::size_t es = core::dtype_size(dtype);
  const WindowMemory mem{ctx.space(), ctx.op.dry};
  const std::vector<std::byte*>& windows = shared.mapped;
  const std::size_t half_bytes = piece_bytes(shared.bytes);
  const std::size_t piece = half_bytes / es;
  RINGLET_CHECK(!windows.empty() && piece > 0, Error, "rank ", r,
                ": window all-reduce without shared windows");
  std::uint64_t& rounds = ctx.states.get<WindowRounds>().next;
  // On the host the reduction goes in cache-sized slices; a device reduces a chunk in one
  // kernel per peer (slices would only multiply the launches).
  const std::size_t slice =
      ctx.space() != nullptr ? piece : std::max<std::size_t>(1, kReduceSliceBytes / es);
  std::size_t begin = 0;
  int step = 0;
  do {
    const std::size_t m = std::min(piece, count - begin);
    const std::uint64_t round = rounds++;
    const auto window = [&](int p) {
      return reinterpret_cast<char*>(windows[p]) + (round % 2) * half_bytes;
    };
    const auto offset = [&](int q) { return split_offset(m, n, q); };
    const auto length = [&](int q) { return split_offset(m, n, q + 1) - split_offset(m, n, q); };

    auto start = std::chrono::steady_clock::now();
    for (int k = 1; k < n; ++k) {
      const int q = (r + k) % n;
      mem.copy(window(r) + offset(q) * es, input + (begin + offset(q)) * es, length(q) * es,
               Across::to_peers);
    }
    mem.fence();
    if (begin == 0) {
      const Staged mine{ctx.op.op_fingerprint, token(round, 0)};
      std::vector<Staged> theirs(static_cast<std::size_t>(n));
      exchange(ctx, mine, theirs, true);
      for (int p = 0; p < n; ++p) {
        if (p != r && theirs[p].token != mine.token) throw ctx.mismatch_error(p);
      }
    } else {
      notify_all(ctx, token(round, 0));
    }

    char* own = data + (begin + offset(r)) * es;
    const std::size_t len = length(r);
    if (input != data && len > 0) {
      mem.copy(own, input + (begin + offset(r)) * es, len * es, Across::none);
    }
    for (std::size_t off = 0; off < len; off += slice) {
      const std::size_t s = std::min(slice, len - off);
      for (int k = 1; k < n; ++k) {
        const int p = (r + k) % n;
        mem.reduce(own + off * es, window(p) + (offset(r) + off) * es, s, dtype, op);
      }
    }
    if (len > 0) mem.copy(window(r) + offset(r) * es, own, len * es, Across::to_peers);
    mem.fence();
    ctx.op.bytes_done += len * es * static_cast<std::size_t>(n - 1);
    for (int k = 1; k < n; ++k) ctx.trace(step++, "RS", r, (r + k) % n, len * es, start);
    notify_all(ctx, token(round, 1));

    for (int k = 1; k < n; ++k) {
      const int q = (r + k) % n;
      start = std::chrono::steady_clock::now();
      ctx.waiting_for(q);
      mem.copy(data + (begin + offset(q)) * es, window(q) + offset(q) * es, length(q) * es,
               Across::from_peer);
      ctx.op.bytes_done += length(q) * es;
      ctx.trace(step++, "AG", q, q, length(q) * es, start);
    }
    mem.fence();
    begin += m;
  } while (begin < count);
}

}  // namespace ringlet::collectives
