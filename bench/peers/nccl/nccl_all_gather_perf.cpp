// nccl_all_gather_perf: all_gather_perf's flags, checking and table for NCCL's all_gather (the peer
// program; see bench/peers/nccl/nccl_engine.h).
#include "bench/peers/nccl/nccl_engine.h"

int main(int argc, char** argv) {
  return ringlet::bench::collective_bench_main(ringlet::bench::Collective::all_gather, argc, argv,
                                               &ringlet::bench::nccl_program());
}
