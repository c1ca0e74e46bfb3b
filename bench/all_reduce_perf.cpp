// all_reduce_perf: nccl-tests' all_reduce_perf for ringlet's communicator: all-reduce (busbw =
// algbw * 2(n-1)/n). Flags, table and checking live in collective_bench.cpp; see bench/README.md.
#include "bench/collective_bench.h"

int main(int argc, char** argv) {
  return ringlet::bench::collective_bench_main(ringlet::bench::Collective::all_reduce, argc, argv);
}
