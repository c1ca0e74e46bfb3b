// Test helpers for the tcp transport: a connected pair of TcpConnections (ranks 0 and 1 of a
// two-rank job) over loopback, built from a Listener and connect_socket in two threads.
#pragma once

#include <doctest/doctest.h>

#include <chrono>
#include <cstring>
#include <future>
#include <memory>
#include <numeric>
#include <vector>

#include "connection_checks.h"
#include "transport/tcp/connection.h"
#include "transport/tcp/listener.h"

namespace ringlet::testing {

using namespace std::chrono_literals;

inline constexpr std::uint64_t kToken = 0x5eed1234abcdULL;

struct TcpPair {
  std::unique_ptr<transport::tcp::Listener> listener;
  std::unique_ptr<transport::tcp::TcpConnection> a;  // rank 0
  std::unique_ptr<transport::tcp::TcpConnection> b;  // rank 1
};

inline transport::tcp::Hello hello_from(int rank, int peer, int index, int count,
                                        std::uint64_t token = kToken) {
  transport::tcp::Hello h;
  h.job_token = token;
  h.rank = static_cast<std::uint32_t>(rank);
  h.peer_rank = static_cast<std::uint32_t>(peer);
  h.socket_index = static_cast<std::uint32_t>(index);
  h.socket_count = static_cast<std::uint32_t>(count);
  return h;
}

inline TcpPair make_tcp_pair(int nsocks, const std::string& host = "127.0.0.1",
                             transport::tcp::TcpOptions options = {}) {
  TcpPair pair;
  pair.listener = std::make_unique<transport::tcp::Listener>(host, 0, kToken, 0, 2);
  const int port = pair.listener->port();
  const auto deadline = core::Deadline::after(10s);
  auto dial = std::async(std::launch::async, [&] {
    std::vector<int> fds;
    for (int i = 0; i < nsocks; ++i) {
      fds.push_back(
          transport::tcp::connect_socket(host, port, hello_from(1, 0, i, nsocks), deadline));
    }
    return fds;
  });
  std::vector<int> accepted;
  for (int i = 0; i < nsocks; ++i) accepted.push_back(pair.listener->take(1, i, deadline));
  pair.a = std::make_unique<transport::tcp::TcpConnection>(0, 1, accepted, options);
  pair.b = std::make_unique<transport::tcp::TcpConnection>(1, 0, dial.get(), options);
  return pair;
}

// Rank 0's TcpConnection of nsocks sockets whose peer is played by hand: `raw` are rank 1's
// sockets (handshake done), for tests that forge frames or end a socket abruptly.
struct RawPeerConnection {
  std::unique_ptr<transport::tcp::TcpConnection> conn;
  std::vector<int> raw;
};

inline RawPeerConnection make_raw_peer_connection(int nsocks, core::Deadline deadline) {
  transport::tcp::Listener listener("127.0.0.1", 0, kToken, 0, 2);
  auto dial = std::async(std::launch::async, [&] {
    std::vector<int> fds;
    for (int i = 0; i < nsocks; ++i) {
      fds.push_back(transport::tcp::connect_socket("127.0.0.1", listener.port(),
                                                   hello_from(1, 0, i, nsocks), deadline));
    }
    return fds;
  });
  std::vector<int> accepted;
  for (int i = 0; i < nsocks; ++i) accepted.push_back(listener.take(1, i, deadline));
  RawPeerConnection peer;
  peer.conn = std::make_unique<transport::tcp::TcpConnection>(0, 1, accepted);
  peer.raw = dial.get();
  return peer;
}

}  // namespace ringlet::testing
