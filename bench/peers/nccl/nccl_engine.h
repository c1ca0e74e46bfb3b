// NCCL as a peer program of the collective benchmarks (bench/peer_engine.h): nccl_all_reduce_perf
// and its siblings print ringlet's nccl-tests table for NCCL's collectives on the same GPUs.
// Built only when the CUDA toolkit's NCCL is found; ringlet's own libraries never link NCCL.
#pragma once

#include "bench/peer_engine.h"

namespace ringlet::bench {

const PeerProgram& nccl_program();

}  // namespace ringlet::bench
