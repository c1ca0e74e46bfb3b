// Point-to-point through a Mesh, over tcp and shm: ranks as threads (4 ranks, every pair, both
// directions at once) and as separate processes (sizes 0, 1, 4 KiB, odd, 64 MiB).
#include <doctest/doctest.h>

#include <cstring>

#include "emulated_rdma.h"
#include "mesh_ranks.h"
#include "same_bytes.h"

using namespace ringlet;
using namespace ringlet::testing;

namespace {

std::vector<unsigned char> payload(std::size_t n, int from, int to) {
  std::vector<unsigned char> v(n);
  for (std::size_t i = 0; i < n; ++i) v[i] = static_cast<unsigned char>(i * 31 + from * 7 + to);
  return v;
}

// Every rank sends one message of each size to every peer and receives every peer's.
void all_pairs(int rank, transport::Mesh& mesh, const std::vector<std::size_t>& sizes) {
  const auto deadline = core::Deadline::after(60s);
  std::vector<std::vector<unsigned char>> out, in;
  std::vector<transport::RequestPtr> sends, recvs;
  std::vector<std::tuple<int, std::size_t, std::size_t>> expect;  // peer, size, slot
  for (int p = 0; p < mesh.size(); ++p) {
    if (p == rank) continue;
    for (auto n : sizes) {
      in.emplace_back(n + 3, 0);
      recvs.push_back(mesh.peer(p).recv(in.back().data(), in.back().size()));
      expect.emplace_back(p, n, in.size() - 1);
      out.push_back(payload(n, rank, p));
      sends.push_back(mesh.peer(p).send(out.back().data(), n));
    }
  }
  transport::wait_all(sends, deadline);
  transport::wait_all(recvs, deadline);
  for (std::size_t k = 0; k < expect.size(); ++k) {
    const auto [p, n, slot] = expect[k];
    REQUIRE(recvs[k]->bytes() == n);
    REQUIRE(testing::same_bytes(in[slot].data(), payload(n, p, rank).data(), n));
  }
}

}  // namespace

TEST_CASE("4 ranks as threads, every pair, over tcp, shm, auto and rdma (emulated)") {
  EmulatedRdma device;
  for (const char* transport : {"tcp", "shm", "auto", "rdma"}) {
    INFO("transport ", transport);
    run_ranks(4, transport, std::string("p2p-threads-") + transport,
              [](int rank, transport::Mesh& mesh) {
                CHECK(mesh.size() == 4);
                all_pairs(rank, mesh, {0, 1, 4096, 12345, 300000});
              });
  }
}

TEST_CASE("the transport of a same-host pair follows RINGLET_TRANSPORT") {
  run_ranks(2, "auto", "p2p-kind-auto", [](int rank, transport::Mesh& mesh) {
    CHECK(std::string(mesh.peer(1 - rank).transport()) == "shm");
  });
  run_ranks(2, "tcp", "p2p-kind-tcp", [](int rank, transport::Mesh& mesh) {
    CHECK(std::string(mesh.peer(1 - rank).transport()) == "tcp");
  });
  CHECK_THROWS_WITH_AS(run_ranks(2, "udp", "p2p-kind-bad", [](int, transport::Mesh&) {}),
                       doctest::Contains("RINGLET_TRANSPORT='udp'"), core::ValueError);
}

TEST_CASE("2 ranks as separate processes, tcp, shm and rdma (emulated), up to 64 MiB") {
  EmulatedRdma device;
  const std::vector<std::size_t> sizes{0, 1, 4096, 12345, std::size_t{64} << 20};
  for (const char* transport : {"tcp", "shm", "rdma"}) {
    INFO("transport ", transport);
    const std::string prefix = std::string("p2p-proc-") + transport;
    ForkedPeer peer = fork_peer([&](int port) {
      transport::TcpStore store("127.0.0.1", port, core::Deadline::after(30s));
      auto mesh = transport::Mesh::connect(store, mesh_options(1, 2, transport, prefix),
                                           core::Deadline::after(30s));
      all_pairs(1, *mesh, sizes);
      transport::store_barrier(store, prefix + "/end", 2, core::Deadline::after(60s));
      return 0;
    });
    {
      transport::TcpStore store("127.0.0.1", peer.port, core::Deadline::after(30s));
      auto mesh = transport::Mesh::connect(store, mesh_options(0, 2, transport, prefix),
                                           core::Deadline::after(30s));
      CHECK(std::string(mesh->peer(1).transport()) == transport);
      all_pairs(0, *mesh, sizes);
      transport::store_barrier(store, prefix + "/end", 2, core::Deadline::after(60s));
    }
    CHECK(wait_child(peer.pid) == 0);
  }
}
