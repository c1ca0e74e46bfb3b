// nccl_all_reduce_perf: all_reduce_perf's flags, checking and table for NCCL's all_reduce (the peer
// program; see bench/peers/nccl/nccl_engine.h).
#include "bench/peers/nccl/nccl_engine.h"

int main(int argc, char** argv) {
  return ringlet::bench::collective_bench_main(ringlet::bench::Collective::all_reduce, argc, argv,
                                               &ringlet::bench::nccl_program());
}
