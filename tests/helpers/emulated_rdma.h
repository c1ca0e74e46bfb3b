// EmulatedRdma: RINGLET_IB_DEVICE=emu0 for a scope, so rdma connections made in it (and in
// processes forked from it) use the emulated verbs provider (transport/rdma/emulated.cpp).
#pragma once

#include <cstdlib>

namespace ringlet::testing {

struct EmulatedRdma {
  EmulatedRdma() { ::setenv("RINGLET_IB_DEVICE", "emu0", 1); }
  ~EmulatedRdma() { ::unsetenv("RINGLET_IB_DEVICE"); }
  EmulatedRdma(const EmulatedRdma&) = delete;
  EmulatedRdma& operator=(const EmulatedRdma&) = delete;
};

}  // namespace ringlet::testing
