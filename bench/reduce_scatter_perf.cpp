// reduce_scatter_perf: nccl-tests' reduce_scatter_perf for ringlet's communicator: reduce-scatter
// (busbw = algbw * (n-1)/n; size is the scattered total). Flags, table and checking live in
// collective_bench.cpp; see bench/README.md.
#include "bench/collective_bench.h"

int main(int argc, char** argv) {
  return ringlet::bench::collective_bench_main(ringlet::bench::Collective::reduce_scatter, argc,
                                               argv);
}
