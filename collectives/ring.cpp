// Ring reduce-scatter and all-gather (and all-reduce = both): at step s rank r sends one chunk
// to its right neighbour and receives the next from its left. Chunk indices are chosen so that
// after the reduce-scatter phase rank r holds the full reduction of chunk r. Each chunk moves
// as slices (one message each); received slices land in a double buffer and are reduced while
// the next slice arrives.
#include <algorithm>
#include <chrono>
#include <cstring>

#include "collectives/algorithms.h"
#include "collectives/reduce_kernels.h"

namespace ringlet::collectives {
namespace {

using Clock = std::chrono::steady_clock;

// One step: send `send_count` elements at `send` to the right neighbour while receiving
// `recv_count` elements from the left into `recv` (combined with op when reducing: with
// `recv_init`, recv = recv_init op received, else recv op= received).
void ring_step(ChannelContext& ctx, const char* send, std::size_t send_count, char* recv,
               std::size_t recv_count, DType dtype, const ReduceOp* op,
               const char* recv_init = nullptr) {
  const std::size_t es = core::dtype_size(dtype);
  const int right = ctx.right(), left = ctx.left();
  transport::Connection& to = ctx.peer(right);
  transport::Connection& from = ctx.peer(left);
  // Each link is sliced as its transport prefers; both ends of a link agree.
  const std::size_t send_slice = std::max<std::size_t>(1, ctx.slice_for(to) / es);
  const std::size_t slice = std::max<std::size_t>(1, ctx.slice_for(from) / es);
  const auto slices = [](std::size_t n, std::size_t per) {
    return std::max<std::size_t>(1, (n + per - 1) / per);
  };
  const auto part = [](std::size_t n, std::size_t per, std::size_t k) {
    return std::min(per, n - std::min(n, k * per));
  };
  const auto slice_len = [&](std::size_t n, std::size_t k) { return part(n, slice, k); };

  std::vector<transport::RequestPtr> sends;
  const std::size_t ns = slices(send_count, send_slice);
  sends.reserve(ns);
  for (std::size_t k = 0; k < ns; ++k) {
    sends.push_back(to.send(send + k * send_slice * es, part(send_count, send_slice, k) * es));
  }
  const std::size_t nr = slices(recv_count, slice);
  if (op == nullptr) {  // gather: straight into place
    std::vector<transport::RequestPtr> recvs;
    recvs.reserve(nr);
    for (std::size_t k = 0; k < nr; ++k) {
      recvs.push_back(from.recv(recv + k * slice * es, slice_len(recv_count, k) * es));
    }
    for (auto& r : recvs) ctx.wait(r, left);
  } else {
    char* tmp = ctx.scratch_bytes(2 * slice * es);
    transport::RequestPtr pending = from.recv(tmp, slice_len(recv_count, 0) * es);
    for (std::size_t k = 0; k < nr; ++k) {
      transport::RequestPtr next;
      if (k + 1 < nr) {
        next = from.recv(tmp + ((k + 1) % 2) * slice * es, slice_len(recv_count, k + 1) * es);
      }
      ctx.wait(pending, left);
      char* dst = recv + k * slice * es;
      reduce_pair(dst, recv_init != nullptr ? recv_init + k * slice * es : dst,
                  tmp + (k % 2) * slice * es, slice_len(recv_count, k), dtype, *op);
      pending = std::move(next);
    }
  }
  for (auto& s : sends) ctx.wait(s, right);
}

// Reduce-scatter phase over chunks given by offsets (size n + 1, in elements). With `input`
// (out of place), this rank's values come from there: the first step sends an untouched chunk
// and every received chunk is combined with the input's.
void rs_phase(ChannelContext& ctx, char* data, const std::vector<std::size_t>& off, DType dtype,
              ReduceOp op, const char* input = nullptr) {
  const int n = ctx.size, r = ctx.rank;
  const std::size_t es = core::dtype_size(dtype);
  for (int s = 0; s < n - 1; ++s) {
    const int send_chunk = ((r - s - 1) % n + n) % n;
    const int recv_chunk = ((r - s - 2) % n + n) % n;
    const auto start = Clock::now();
    const std::size_t send_count = off[send_chunk + 1] - off[send_chunk];
    const char* send = (input != nullptr && s == 0 ? input : data) + off[send_chunk] * es;
    ring_step(ctx, send, send_count, data + off[recv_chunk] * es,
              off[recv_chunk + 1] - off[recv_chunk], dtype, &op,
              input != nullptr ? input + off[recv_chunk] * es : nullptr);
    ctx.trace(s, "RS", send_chunk, ctx.right(), send_count * es, start);
  }
}

// All-gather phase: rank r starts with chunk r complete.
void ag_phase(ChannelContext& ctx, char* data, const std::vector<std::size_t>& off, DType dtype,
              int step_base) {
  const int n = ctx.size, r = ctx.rank;
  const std::size_t es = core::dtype_size(dtype);
  for (int s = 0; s < n - 1; ++s) {
    const int send_chunk = ((r - s) % n + n) % n;
    const int recv_chunk = ((r - s - 1) % n + n) % n;
    const auto start = Clock::now();
    const std::size_t send_count = off[send_chunk + 1] - off[send_chunk];
    ring_step(ctx, data + off[send_chunk] * es, send_count, data + off[recv_chunk] * es,
              off[recv_chunk + 1] - off[recv_chunk], dtype, nullptr);
    ctx.trace(step_base + s, "AG", send_chunk, ctx.right(), send_count * es, start);
  }
}

std::vector<std::size_t> balanced(std::size_t count, int n) {
  std::vector<std::size_t> off(n + 1);
  for (int i = 0; i <= n; ++i) off[i] = split_offset(count, n, i);
  return off;
}

std::vector<std::size_t> blocks(std::size_t block, int n) {
  std::vector<std::size_t> off(n + 1);
  for (int i = 0; i <= n; ++i) off[i] = block * i;
  return off;
}

}  // namespace

void ring_all_reduce(ChannelContext& ctx, char* data, std::size_t count, DType dtype, ReduceOp op,
                     const char* input) {
  if (input == data) input = nullptr;
  if (ctx.size == 1) {
    if (input != nullptr && count > 0) std::memcpy(data, input, count * core::dtype_size(dtype));
    return;
  }
  const auto off = balanced(count, ctx.size);
  rs_phase(ctx, data, off, dtype, op, input);
  ag_phase(ctx, data, off, dtype, ctx.size - 1);
}

void ring_reduce_scatter(ChannelContext& ctx, char* data, std::size_t count, DType dtype,
                         ReduceOp op) {
  if (ctx.size > 1) rs_phase(ctx, data, balanced(count, ctx.size), dtype, op);
}

void ring_all_gather(ChannelContext& ctx, char* data, std::size_t count, DType dtype) {
  if (ctx.size > 1) ag_phase(ctx, data, balanced(count, ctx.size), dtype, 0);
}

void ring_reduce_scatter_blocks(ChannelContext& ctx, char* data, std::size_t block, DType dtype,
                                ReduceOp op) {
  if (ctx.size > 1) rs_phase(ctx, data, blocks(block, ctx.size), dtype, op);
}

void ring_all_gather_blocks(ChannelContext& ctx, char* data, std::size_t block, DType dtype) {
  if (ctx.size > 1) ag_phase(ctx, data, blocks(block, ctx.size), dtype, 0);
}

}  // namespace ringlet::collectives
