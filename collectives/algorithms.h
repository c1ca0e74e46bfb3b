// The algorithms, each running one channel's part of a collective synchronously on the
// calling (progress) thread. Data pointers are host memory; counts are elements.
#pragma once

#include "collectives/context.h"

namespace ringlet::collectives {

// Ring reduce-scatter + all-gather over data[0, count): 2(n-1) steps, each chunk pipelined in
// slices (receive slice k+1 while reducing slice k). In place when `input` is null; otherwise
// the rank's contribution is read from `input` (out of place) as the steps need it, slice by
// slice, instead of copied into data up front.
void ring_all_reduce(ChannelContext& ctx, char* data, std::size_t count, DType dtype, ReduceOp op,
                     const char* input = nullptr);
// Ring reduce-scatter over equal blocks of `block` elements: afterwards block `rank` holds the
// reduction of every rank's block. Ring all-gather in place: block r comes from rank r.
void ring_reduce_scatter_blocks(ChannelContext& ctx, char* data, std::size_t block, DType dtype,
                                ReduceOp op);
void ring_all_gather_blocks(ChannelContext& ctx, char* data, std::size_t block, DType dtype);

// Direct reduce-scatter + all-gather through cross-memory attach (every peer connection must
// can_read_peer()): each byte crosses between processes once per phase. In place when `input`
// is null. See direct.cpp for the three message rounds that order the reads.
void direct_all_reduce(ChannelContext& ctx, char* data, std::size_t count, DType dtype, ReduceOp op,
                       const char* input = nullptr);

// Reduce-scatter + all-gather through the ranks' shared windows (ctx.windows, all on one
// host): pieces of half a window, each staged, reduced and gathered with plain loads and two
// message rounds. In place when `input` is null. See window.cpp.
void window_all_reduce(ChannelContext& ctx, char* data, std::size_t count, DType dtype, ReduceOp op,
                       const char* input = nullptr);

// Recursive doubling with the non-power-of-two fold (latency-optimal for small messages).
void rd_all_reduce(ChannelContext& ctx, char* data, std::size_t count, DType dtype, ReduceOp op);

// Pipelined chain from root around the ring.
void chain_broadcast(ChannelContext& ctx, char* data, std::size_t count, DType dtype, int root);
// Pipelined chain toward root; data is this rank's contribution, result lands in data on root.
void chain_reduce(ChannelContext& ctx, char* data, std::size_t count, DType dtype, ReduceOp op,
                  int root);

// Dissemination barrier: ceil(log2 n) rounds of 1-byte messages.
void dissemination_barrier(ChannelContext& ctx);

}  // namespace ringlet::collectives
