// nccl_reduce_scatter_perf: reduce_scatter_perf's flags, checking and table for NCCL's
// reduce_scatter (the peer program; see bench/peers/nccl/nccl_engine.h).
#include "bench/peers/nccl/nccl_engine.h"

int main(int argc, char** argv) {
  return ringlet::bench::collective_bench_main(ringlet::bench::Collective::reduce_scatter, argc,
                                               argv, &ringlet::bench::nccl_program());
}
