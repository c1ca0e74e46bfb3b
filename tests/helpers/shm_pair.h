// Two shm connections between threads of this process (rendezvous through an in-memory
// store): rank 0's end creates the segment.
#pragma once

#include <chrono>
#include <cstdlib>
#include <future>
#include <memory>
#include <string>

#include "memory_store.h"
#include "transport/shm/connection.h"

namespace ringlet::testing {

struct ShmPair {
  MemoryStore store;
  std::unique_ptr<transport::Connection> a;  // rank 0 (creates the segment)
  std::unique_ptr<transport::Connection> b;  // rank 1
};

inline std::unique_ptr<ShmPair> make_shm_pair(const std::string& prefix = "test") {
  auto pair = std::make_unique<ShmPair>();
  const auto deadline = core::Deadline::after(std::chrono::seconds(10));
  auto lower = std::async(std::launch::async, [&] {
    return transport::connect_shm(0, 1, pair->store, prefix, deadline);
  });
  pair->b = transport::connect_shm(1, 0, pair->store, prefix, deadline);
  pair->a = lower.get();
  return pair;
}

// A pair whose rings hold 4 KiB each, so that a test can fill one or wrap round its end. Its
// sends go back to the ring's start whatever the connection's probe measured (a loaded machine
// can read apart), so where each message lies is the same on every run.
inline std::unique_ptr<ShmPair> make_small_ring_pair(const std::string& prefix) {
  setenv("RINGLET_SHM_RING_BYTES", "4096", 1);
  setenv("RINGLET_SHM_GO_BACK", "1", 1);
  auto pair = make_shm_pair(prefix);
  unsetenv("RINGLET_SHM_RING_BYTES");
  unsetenv("RINGLET_SHM_GO_BACK");
  return pair;
}

}  // namespace ringlet::testing
