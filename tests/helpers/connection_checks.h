// Checks the transport tests (tcp, shm, rdma) share: deterministic bytes, a two-way exchange
// through a pair of connections, and a wait that must end in a PeerError.
#pragma once

#include <doctest/doctest.h>
#include <unistd.h>

#include <chrono>
#include <cstddef>
#include <filesystem>
#include <string>
#include <vector>

#include "same_bytes.h"
#include "transport/connection.h"
#include "transport/errors.h"

namespace ringlet::testing {

// Deterministic bytes that differ per (seed, index).
inline std::vector<unsigned char> pattern(std::size_t n, unsigned seed) {
  std::vector<unsigned char> v(n);
  for (std::size_t i = 0; i < n; ++i) v[i] = static_cast<unsigned char>((i * 131 + seed * 7) % 251);
  return v;
}

// Sends a to b and b to a at once (receives posted one byte larger); checks both arrive intact
// and the byte counts.
inline void exchange(transport::Connection& a, transport::Connection& b, std::size_t bytes,
                     unsigned seed, std::chrono::seconds wait) {
  const auto out_a = pattern(bytes, seed), out_b = pattern(bytes, seed + 1);
  std::vector<unsigned char> in_a(bytes + 1, 0), in_b(bytes + 1, 0);
  transport::RequestPtr ra = a.recv(in_a.data(), in_a.size());
  transport::RequestPtr rb = b.recv(in_b.data(), in_b.size());
  transport::RequestPtr sa = a.send(out_a.data(), out_a.size());
  transport::RequestPtr sb = b.send(out_b.data(), out_b.size());
  transport::wait_all({sa, sb, ra, rb}, core::Deadline::after(wait));
  CHECK(ra->bytes() == bytes);
  CHECK(rb->bytes() == bytes);
  CHECK(sa->bytes() == bytes);
  CHECK(same_bytes(in_a.data(), out_b.data(), bytes));
  CHECK(same_bytes(in_b.data(), out_a.data(), bytes));
}

// Waits on a request that must fail with a PeerError within `within`; returns its message.
inline std::string expect_peer_error(const transport::RequestPtr& request,
                                     std::chrono::seconds within) {
  try {
    request->wait(core::Deadline::after(within));
  } catch (const transport::PeerError& e) {
    return e.what();
  }
  FAIL("expected a PeerError");
  return "";
}

// How many /dev/shm objects named "<kind><this pid>-..." exist (kind "ringlet-shm-" or
// "ringlet-ibemu-"): what this process's connections left linked.
inline int shm_objects_of_this_process(const std::string& kind) {
  const std::string prefix = kind + std::to_string(::getpid()) + "-";
  int count = 0;
  for (const auto& entry : std::filesystem::directory_iterator("/dev/shm")) {
    if (entry.path().filename().string().rfind(prefix, 0) == 0) ++count;
  }
  return count;
}

}  // namespace ringlet::testing
