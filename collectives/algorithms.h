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
// Ring reduce-scatter over data split at `offsets` (ctx.size + 1 element offsets): afterwards
// part `ctx.rank` holds the reduction of every rank's part (the other parts are scratch). Out of
// place when `input` is set: this rank's values are read from there. Ring all-gather in place
// over the same split: part r comes from rank r.
void ring_reduce_scatter(ChannelContext& ctx, char* data, std::vector<std::size_t> offsets,
                         DType dtype, ReduceOp op, const char* input = nullptr);
void ring_all_gather(ChannelContext& ctx, char* data, std::vector<std::size_t> offsets,
                     DType dtype);
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

// A rank's two rings in the hierarchical all-reduce (global ranks, in ring order): the ranks
// on its host, and the ranks of its local index on every host (collectives/topology.h).
struct HostRings {
  std::vector<int> local;
  std::vector<int> cross;
};
// Hierarchical all-reduce for ranks on several hosts (the same number on each): the local ranks
// reduce-scatter data in local.size() parts, each runs the ring all-reduce of its part over its
// cross ring, then the local ranks all-gather the parts. A host sends 2(h-1)/h x the buffer to
// other hosts, where a flat ring sends 2(n-1)/n x over its link out of the host. In place when
// `input` is null. See hierarchical.cpp.
void hierarchical_all_reduce(ChannelContext& ctx, const HostRings& rings, char* data,
                             std::size_t count, DType dtype, ReduceOp op,
                             const char* input = nullptr);

// Recursive doubling with the non-power-of-two fold (latency-optimal for small messages). In
// place when `input` is null; else the first round reads the input and the result lands in
// data, with no copy of the input into data first.
void rd_all_reduce(ChannelContext& ctx, char* data, std::size_t count, DType dtype, ReduceOp op,
                   const char* input = nullptr);

// Pipelined chain from root around the ring.
void chain_broadcast(ChannelContext& ctx, char* data, std::size_t count, DType dtype, int root);
// Pipelined chain toward root; data is this rank's contribution, result lands in data on root.
void chain_reduce(ChannelContext& ctx, char* data, std::size_t count, DType dtype, ReduceOp op,
                  int root);

// Dissemination barrier: ceil(log2 n) rounds of 1-byte messages.
void dissemination_barrier(ChannelContext& ctx);

}  // namespace ringlet::collectives
