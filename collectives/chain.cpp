// Pipelined chains and the dissemination barrier. Broadcast: root -> root+1 -> ... in slices,
// each rank forwarding slice k as soon as it arrived. Reduce: root+1 -> ... -> root, each rank
// adding its contribution to a slice before passing it on. Barrier: in round k every rank
// signals rank + 2^k and waits for rank - 2^k; after ceil(log2 n) rounds everyone has arrived.
// Device buffers (the op's space) travel through pinned staging: slices are copied out before they
// are sent, received into staging (and forwarded from there), and reduced on the device
// straight out of the pinned double buffer.
#include <algorithm>
#include <chrono>

#include "collectives/algorithms.h"
#include "collectives/reduce_kernels.h"

namespace ringlet::collectives {
namespace {

struct Slicing {
  std::size_t slice, es, count;
  std::size_t slices() const { return std::max<std::size_t>(1, (count + slice - 1) / slice); }
  std::size_t bytes(std::size_t k) const {
    return std::min(slice, count - std::min(count, k * slice)) * es;
  }
  std::size_t offset(std::size_t k) const { return k * slice * es; }
};

Slicing slicing(const ChannelContext& ctx, std::size_t count, DType dtype) {
  const std::size_t es = core::dtype_size(dtype);
  return {std::max<std::size_t>(1, ctx.uniform_slice() / es), es, count};
}

}  // namespace

void chain_broadcast(const ChannelContext& ctx, char* data, std::size_t count, DType dtype,
                     int root) {
  const int n = ctx.size;
  if (n == 1) return;
  const int pos = (ctx.rank - root + n) % n;
  const bool forwards = pos < n - 1;
  const Slicing s = slicing(ctx, count, dtype);
  BufferSpace* space = ctx.space();
  // Where the slices are received and sent from: the data, or (device) pinned staging.
  char* wire = space != nullptr ? space->staging(0, count * s.es) : data;
  const auto start = std::chrono::steady_clock::now();
  std::vector<transport::RequestPtr> recvs, sends;
  if (pos > 0) {
    for (std::size_t k = 0; k < s.slices(); ++k) {
      recvs.push_back(ctx.peer(ctx.left()).recv(wire + s.offset(k), s.bytes(k)));
    }
  }
  for (std::size_t k = 0; k < s.slices(); ++k) {
    if (pos > 0) ctx.wait(recvs[k], ctx.left());
    if (space != nullptr) {
      if (pos > 0) {
        space->copy(data + s.offset(k), wire + s.offset(k), s.bytes(k));
      } else {
        space->copy(wire + s.offset(k), data + s.offset(k), s.bytes(k));
        space->fence();
      }
    }
    if (forwards) sends.push_back(ctx.peer(ctx.right()).send(wire + s.offset(k), s.bytes(k)));
  }
  for (auto& q : sends) ctx.wait(q, ctx.right());
  if (space != nullptr) space->fence();
  ctx.trace(0, "BCAST", -1, forwards ? ctx.right() : ctx.left(), count * s.es, start);
}

void chain_reduce(const ChannelContext& ctx, char* data, std::size_t count, DType dtype,
                  ReduceOp op, int root) {
  const int n = ctx.size;
  if (n == 1) return;
  const int pos = (ctx.rank - root - 1 + 2 * n) % n;  // 0 starts the chain, n-1 is the root
  const Slicing s = slicing(ctx, count, dtype);
  const auto start = std::chrono::steady_clock::now();
  std::vector<transport::RequestPtr> sends;
  const bool receives = pos > 0, forwards = pos < n - 1;
  BufferSpace* space = ctx.space();
  char* tmp = !receives          ? nullptr
              : space != nullptr ? space->staging(2, 2 * s.slice * s.es)
                                 : ctx.scratch_bytes(2 * s.slice * s.es);
  // What is sent: the data, or (device) its slices copied out into pinned staging.
  char* wire = space != nullptr && forwards ? space->staging(0, count * s.es) : data;
  transport::RequestPtr pending;
  if (receives) pending = ctx.peer(ctx.left()).recv(tmp, s.bytes(0));
  for (std::size_t k = 0; k < s.slices(); ++k) {
    if (receives) {
      transport::RequestPtr next;
      if (k + 1 < s.slices()) {
        next = ctx.peer(ctx.left()).recv(tmp + ((k + 1) % 2) * s.slice * s.es, s.bytes(k + 1));
      }
      ctx.wait(pending, ctx.left());
      char* got = tmp + (k % 2) * s.slice * s.es;
      if (space != nullptr) {
        space->reduce_into(data + s.offset(k), got, s.bytes(k) / s.es, dtype, op);
      } else {
        reduce_into(data + s.offset(k), got, s.bytes(k) / s.es, dtype, op);
      }
      pending = std::move(next);
    }
    if (space != nullptr) {
      if (forwards) space->copy(wire + s.offset(k), data + s.offset(k), s.bytes(k));
      space->fence();  // the slice is out (and its pinned half free for the next receive)
    }
    if (forwards) sends.push_back(ctx.peer(ctx.right()).send(wire + s.offset(k), s.bytes(k)));
  }
  for (auto& q : sends) ctx.wait(q, ctx.right());
  ctx.trace(0, "REDUCE", -1, forwards ? ctx.right() : ctx.left(), count * s.es, start);
}

void dissemination_barrier(const ChannelContext& ctx) {
  const int n = ctx.size;
  char token = 1, got = 0;
  int step = 0;
  for (int d = 1; d < n; d *= 2, ++step) {
    const auto start = std::chrono::steady_clock::now();
    const int to = (ctx.rank + d) % n, from = (ctx.rank - d + n) % n;
    auto recv = ctx.peer(from).recv(&got, 1);
    auto send = ctx.peer(to).send(&token, 1);
    ctx.wait(send, to);
    ctx.wait(recv, from);
    ctx.trace(step, "BARRIER", -1, to, 1, start);
  }
}

}  // namespace ringlet::collectives
