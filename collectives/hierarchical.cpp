// Hierarchical all-reduce, for ranks on h hosts with l ranks each (l >= 2, h >= 2):
//
//   1. local reduce-scatter: the l ranks of a host split the buffer into l parts and run the
//      ring reduce-scatter over their own connections (shm): local rank i ends with part i
//      summed over the host;
//   2. cross-host all-reduce: local rank i runs the ring all-reduce of part i with local rank i
//      of every other host (h ranks, one per host): part i is now summed over every rank;
//   3. local all-gather: the host's ranks gather the l finished parts.
//
// What crosses between hosts: in step 2 each rank sends 2(h-1)/h of its part, so a host sends
// 2(h-1)/h x S bytes for an S-byte buffer. A flat ring over n = h x l ranks, each host's ranks
// consecutive, sends 2(n-1)/n x S over the one ring link that leaves each host: 1.5 S against
// 1.0 S on 2 hosts x 2 ranks, so where that link is the limit the hierarchy is 1.5x faster.
// The l cross-host rings of step 2 run at once, sharing the hosts' links. Each ring checks the
// op's fingerprint with its own neighbours before any data moves; trace steps are numbered
// through the op and labelled "local RS", "cross RS", "cross AG", "local AG".
#include "collectives/algorithms.h"

namespace ringlet::collectives {
namespace {

// Posts the op's fingerprint to `ranks`' ring neighbours (the whole ring's exchange checks only
// the global ones), before any of the op's data goes to them: every rank posts the whole ring's,
// the local ring's, then the cross ring's, so each connection carries them in the order its
// receiver expects.
void post_sub_ring_fingerprint(ChannelContext& ctx, const std::vector<int>& ranks,
                               FingerprintExchange& exchange) {
  SubRing ring(ctx, ranks);
  if (ctx.size == 1) return;
  exchange.post(ctx.peer(ctx.left()), ctx.peer(ctx.right()), ctx.op_fingerprint,
                ctx.global_rank(ctx.rank), ctx.global_rank(ctx.left()),
                ctx.global_rank(ctx.right()), {});
}

}  // namespace

void hierarchical_all_reduce(ChannelContext& ctx, const HostRings& rings, char* data,
                             std::size_t count, DType dtype, ReduceOp op, const char* input) {
  post_sub_ring_fingerprint(ctx, rings.local, ctx.sub_ring_fingerprints[0]);
  post_sub_ring_fingerprint(ctx, rings.cross, ctx.sub_ring_fingerprints[1]);
  for (FingerprintExchange& exchange : ctx.sub_ring_fingerprints) {
    exchange.settle(ctx.deadline, &ctx.waiting_on);  // a mismatch throws before any data moves
  }
  const std::vector<std::size_t> parts = balanced(count, static_cast<int>(rings.local.size()));
  int mine = 0;  // this rank's local index: the part it carries across hosts
  {
    SubRing host(ctx, rings.local, "local RS", "local AG");
    mine = ctx.rank;
    ring_reduce_scatter(ctx, data, parts, dtype, op, input);
  }
  {
    SubRing across(ctx, rings.cross, "cross RS", "cross AG");
    const std::size_t es = core::dtype_size(dtype);
    ring_all_reduce(ctx, data + parts[mine] * es, parts[mine + 1] - parts[mine], dtype, op);
  }
  SubRing host(ctx, rings.local, "local RS", "local AG");
  ring_all_gather(ctx, data, parts, dtype);
}

}  // namespace ringlet::collectives
