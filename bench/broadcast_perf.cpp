// broadcast_perf: nccl-tests' broadcast_perf for ringlet's communicator: broadcast from -r root
// (busbw = algbw). Flags, table and checking live in collective_bench.cpp; see bench/README.md.
#include "bench/collective_bench.h"

int main(int argc, char** argv) {
  return ringlet::bench::collective_bench_main(ringlet::bench::Collective::broadcast, argc, argv);
}
