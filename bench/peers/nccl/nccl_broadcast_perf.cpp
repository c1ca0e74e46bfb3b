// nccl_broadcast_perf: broadcast_perf's flags, checking and table for NCCL's broadcast (the peer
// program; see bench/peers/nccl/nccl_engine.h).
#include "bench/peers/nccl/nccl_engine.h"

int main(int argc, char** argv) {
  return ringlet::bench::collective_bench_main(ringlet::bench::Collective::broadcast, argc, argv,
                                               &ringlet::bench::nccl_program());
}
