// The algorithms, each running one channel's part of a collective synchronously on the
// calling (progress) thread. Buffers are host memory, or device memory reached through the
// op's BufferSpace (ctx.space()); counts are elements.
//
// One in-place convention, the communicator's: the result lands in `data` and this rank's
// contribution is read from `input`; input == data is in place. An out-of-place algorithm reads
// the input as its steps need it instead of copying it into data first.
// The all-reduce algorithms run with two ranks or more: run_all_reduce (communicator.cpp) is
// the one place that handles a single rank.
#pragma once

#include "collectives/context.h"

namespace ringlet::collectives {

// Ring reduce-scatter + all-gather over data[0, count): 2(n-1) steps, each chunk pipelined in
// slices (receive slice k+1 while reducing slice k).
void ring_all_reduce(const ChannelContext& ctx, const char* input, char* data, std::size_t count,
                     DType dtype, ReduceOp op);
// Ring reduce-scatter over data split at `offsets` (ctx.size + 1 element offsets): afterwards
// part `ctx.rank` holds the reduction of every rank's part (the other parts are scratch). Ring
// all-gather in place over the same split: part r comes from rank r. A single rank copies.
void ring_reduce_scatter(const ChannelContext& ctx, const char* input, char* data,
                         std::vector<std::size_t> offsets, DType dtype, ReduceOp op);
void ring_all_gather(const ChannelContext& ctx, char* data, std::vector<std::size_t> offsets,
                     DType dtype);
// Ring reduce-scatter over equal blocks of `block` elements: afterwards block `rank` holds the
// reduction of every rank's block. Ring all-gather in place: block r comes from rank r.
void ring_reduce_scatter_blocks(const ChannelContext& ctx, char* data, std::size_t block,
                                DType dtype, ReduceOp op);
void ring_all_gather_blocks(const ChannelContext& ctx, char* data, std::size_t block, DType dtype);
// Bruck's all-gather over the same blocks: ceil(log2 n) steps of doubling size, then a rotation.
// Host buffers. See bruck.cpp.
void bruck_all_gather(const ChannelContext& ctx, char* data, std::size_t block, DType dtype);
// Rabenseifner's two halves on their own, over the same blocks: reduce-scatter by recursive
// halving (input: this rank's n blocks; afterwards block `rank` of data holds the reduction, the
// other blocks are scratch) and all-gather by recursive doubling, each in log2(p) steps plus a
// fold and an unfold for n not a power of two. Host buffers. See halving_doubling.cpp.
void halving_reduce_scatter(const ChannelContext& ctx, const char* input, char* data,
                            std::size_t block, DType dtype, ReduceOp op);
void doubling_all_gather(const ChannelContext& ctx, char* data, std::size_t block, DType dtype);

// Direct reduce-scatter + all-gather through cross-memory attach (every peer connection must
// can_read_peer()): each byte crosses between processes once per phase. See direct.cpp for the
// three message rounds that order the reads.
void direct_all_reduce(const ChannelContext& ctx, const char* input, char* data, std::size_t count,
                       DType dtype, ReduceOp op);

// The ranks' shared windows (all on one host): windows[p] is rank p's as mapped here.
struct Windows {
  std::vector<std::byte*> mapped;
  std::size_t bytes = 0;
};
// Reduce-scatter + all-gather through the ranks' shared windows (host shared memory, or device
// windows opened over IPC when the op's buffers are a device's): pieces of half a window, each
// staged, reduced and gathered with plain loads (or the device's copies) and two message
// rounds. See window.cpp.
void window_all_reduce(const ChannelContext& ctx, const Windows& windows, const char* input,
                       char* data, std::size_t count, DType dtype, ReduceOp op);

// The hierarchical all-reduce's plan: a rank's two rings (global ranks, in ring order), the
// ranks on its host and the ranks of its local index on every host (collectives/topology.h),
// and the unit a host buffer is pipelined in (0: one piece).
struct HostRings {
  std::vector<int> local;
  std::vector<int> cross;
  std::size_t piece_bytes = 0;
};
// Hierarchical all-reduce for ranks on several hosts (the same number on each): the local ranks
// reduce-scatter data in local.size() parts, each runs the ring all-reduce of its part over its
// cross ring, then the local ranks all-gather the parts. A host sends 2(h-1)/h x the buffer to
// other hosts, where a flat ring sends 2(n-1)/n x over its link out of the host. See
// hierarchical.cpp.
void hierarchical_all_reduce(const ChannelContext& ctx, const HostRings& rings, const char* input,
                             char* data, std::size_t count, DType dtype, ReduceOp op);

// Recursive doubling with the non-power-of-two fold (latency-optimal for small messages): the
// first round reads the input, and the result lands in data.
void rd_all_reduce(const ChannelContext& ctx, const char* input, char* data, std::size_t count,
                   DType dtype, ReduceOp op);

// Rabenseifner's: reduce-scatter by recursive halving, all-gather by recursive doubling, over
// the largest power of two of ranks (the others fold in first and get the result at the end);
// the ring's bytes in 2 log2(p) steps. Host buffers. See rabenseifner.cpp.
void rabenseifner_all_reduce(const ChannelContext& ctx, const char* input, char* data,
                             std::size_t count, DType dtype, ReduceOp op);

// Double binary tree: each half of the buffer reduced up one of two binary trees and broadcast
// back down it, in chunks of the uniform slice; the second tree is the first with every rank
// moved one place on. Host buffers. See tree.cpp.
void tree_all_reduce(const ChannelContext& ctx, const char* input, char* data, std::size_t count,
                     DType dtype, ReduceOp op);

// Pipelined chain from root around the ring.
void chain_broadcast(const ChannelContext& ctx, char* data, std::size_t count, DType dtype,
                     int root);
// Pipelined chain toward root; data is this rank's contribution, result lands in data on root.
void chain_reduce(const ChannelContext& ctx, char* data, std::size_t count, DType dtype,
                  ReduceOp op, int root);

// Dissemination barrier: ceil(log2 n) rounds of 1-byte messages.
void dissemination_barrier(const ChannelContext& ctx);

// One rank's block of a personalized collective: where it lies and its length in bytes.
struct Block {
  char* data = nullptr;
  std::size_t bytes = 0;
};
struct ConstBlock {
  const char* data = nullptr;
  std::size_t bytes = 0;
};
// Pairwise all-to-all (host buffers): send[p] goes to rank p, recv[p] comes from rank p; a block
// received with another length than recv[p].bytes is an error naming both ranks.
void pairwise_all_to_all(const ChannelContext& ctx, const std::vector<ConstBlock>& send,
                         const std::vector<Block>& recv);
// Flat gather to root: recv[p] (root only) gets rank p's `mine`.
void flat_gather(const ChannelContext& ctx, ConstBlock mine, const std::vector<Block>& recv,
                 int root);
// Flat scatter from root: rank p's `mine` gets send[p] (root only).
void flat_scatter(const ChannelContext& ctx, const std::vector<ConstBlock>& send, Block mine,
                  int root);

}  // namespace ringlet::collectives
