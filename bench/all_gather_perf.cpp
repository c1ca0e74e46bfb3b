// all_gather_perf: nccl-tests' all_gather_perf for ringlet's communicator: all-gather (busbw =
// algbw * (n-1)/n; size is the gathered total). Flags, table and checking live in
// collective_bench.cpp; see bench/README.md.
#include "bench/collective_bench.h"

int main(int argc, char** argv) {
  return ringlet::bench::collective_bench_main(ringlet::bench::Collective::all_gather, argc, argv);
}
