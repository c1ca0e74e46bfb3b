// The simulated network's tests' common ground: a profile of round figures that keeps closed forms
// readable, one collective simulated under it, and one message (or one each way) between two ranks.
#pragma once

#include <cstddef>

#include "collectives/algorithm_choice.h"
#include "core/deadline.h"
#include "model/network.h"
#include "model/profile.h"
#include "model/simulate.h"

namespace ringlet::testing {

// Round figures; slices larger than any message of the tests.
inline model::Profile test_profile() {
  model::Profile p;
  p.name = "test";
  p.intra = {2.0, 4.0};
  p.inter = {2.0, 4.0};
  p.nic_GBps = 4.0;
  p.reduce_GBps = 8.0;
  p.copy_GBps = 16.0;
  p.slice_bytes = std::size_t{1} << 30;
  return p;
}

inline double simulated(model::Collective collective, collectives::Algorithm algorithm, int ranks,
                        int per_host, std::size_t bytes,
                        const model::Profile& profile = test_profile()) {
  model::SimCase c;
  c.collective = collective;
  c.algorithm = algorithm;
  c.shape = {ranks, per_host};
  c.bytes = bytes;
  return model::simulate(c, profile).seconds;
}

// Rank 0 sends `bytes` to rank 1; with `both`, rank 1 sends as many back at the same time. Each
// rank's collective buffer is `buffer` bytes (what the caches hold of it).
inline double messages(const model::Profile& profile, std::size_t bytes, std::size_t buffer,
                       bool both, int per_host = 0) {
  model::VirtualNetwork net({2, per_host}, profile);
  net.set_buffer_bytes(buffer);
  return net.run([&](int rank) {
    auto received = rank == 1 || both ? net.recv(rank, 1 - rank, bytes) : nullptr;
    if (rank == 0 || both) net.send(rank, 1 - rank, bytes)->wait(core::Deadline::never());
    if (received) received->wait(core::Deadline::never());
  });
}

}  // namespace ringlet::testing
