// Fault injection: a peer process killed with SIGKILL mid-transfer (tcp and shm) turns into a
// PeerError naming the peer within the deadline; strangers on a live job's listen port and store
// are refused while the job goes on unaffected.
#include <arpa/inet.h>
#include <doctest/doctest.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include <cstring>

#include "mesh_ranks.h"
#include "raw_socket.h"

using namespace ringlet;
using namespace ringlet::testing;

namespace {

using ringlet::testing::raw_connect;

}  // namespace

TEST_CASE("kill -9 of a peer mid-transfer fails the survivor within the deadline") {
  for (const char* transport : {"tcp", "shm"}) {
    INFO("transport ", transport);
    const std::string prefix = std::string("fault-kill-") + transport;
    constexpr std::size_t kChunk = 4 << 20;
    ForkedPeer peer = fork_peer([&](int port) {
      transport::TcpStore store("127.0.0.1", port, core::Deadline::after(30s));
      auto mesh = transport::Mesh::connect(store, mesh_options(1, 2, transport, prefix),
                                           core::Deadline::after(30s));
      std::vector<unsigned char> data(kChunk, 0x5a);
      for (int i = 0; i < 100000; ++i) {  // bounded: streams until it is killed
        mesh->peer(0).send(data.data(), data.size())->wait(core::Deadline::after(60s));
      }
      return 0;
    });
    std::vector<unsigned char> buf(kChunk);
    transport::TcpStore store("127.0.0.1", peer.port, core::Deadline::after(30s));
    auto mesh = transport::Mesh::connect(store, mesh_options(0, 2, transport, prefix),
                                         core::Deadline::after(30s));
    for (int i = 0; i < 3; ++i) {
      mesh->peer(1).recv(buf.data(), buf.size())->wait(core::Deadline::after(30s));
    }
    REQUIRE(::kill(peer.pid, SIGKILL) == 0);
    CHECK(wait_child(peer.pid) == -SIGKILL);
    const auto start = std::chrono::steady_clock::now();
    bool failed = false;
    for (int i = 0; i < 1000 && !failed; ++i) {  // messages already in flight may still land
      try {
        mesh->peer(1).recv(buf.data(), buf.size())->wait(core::Deadline::after(10s));
      } catch (const core::PeerError& e) {
        failed = true;
        const std::string what = e.what();
        CHECK(what.find("peer rank 1") != std::string::npos);
        CHECK(what.find(transport) != std::string::npos);
        CHECK(what.find("bytes") != std::string::npos);
      }
    }
    CHECK(failed);
    CHECK(std::chrono::steady_clock::now() - start < 10s);
  }
}

TEST_CASE("a stranger on a live job's listen port is refused and the job goes on") {
  run_ranks(2, "tcp", "fault-stranger", [](int rank, transport::Mesh& mesh) {
    if (rank == 0) {
      const int fd = raw_connect(mesh.listen_endpoint());
      const char junk[40] = "\x01\x02garbage that is not a handshake";
      CHECK(::write(fd, junk, sizeof junk) == static_cast<ssize_t>(sizeof junk));
      char byte;
      CHECK(::read(fd, &byte, 1) <= 0);
      ::close(fd);
      for (int i = 0; i < 200 && mesh.refused_connections() == 0; ++i) {
        std::this_thread::sleep_for(10ms);
      }
      CHECK(mesh.refused_connections() == 1);
    }
    // the job is unaffected: a round of messages still works
    std::vector<int> out{rank, rank + 10}, in(2, -1);
    auto r = mesh.peer(1 - rank).recv(in.data(), sizeof(int) * 2);
    mesh.peer(1 - rank).send(out.data(), sizeof(int) * 2)->wait(core::Deadline::after(10s));
    r->wait(core::Deadline::after(10s));
    CHECK(in == std::vector<int>{1 - rank, 11 - rank});
  });
}

TEST_CASE("a stranger on the store port does not disturb the store") {
  transport::TcpStoreServer server("127.0.0.1", 0);
  transport::TcpStore store("127.0.0.1", server.port(), core::Deadline::after(10s));
  store.set("before", "1");
  const int fd = raw_connect("127.0.0.1:" + std::to_string(server.port()));
  unsigned char huge[64];
  std::memset(huge, 0xff, sizeof huge);  // claims absurd lengths everywhere
  CHECK(::write(fd, huge, sizeof huge) == static_cast<ssize_t>(sizeof huge));
  char byte;
  CHECK(::read(fd, &byte, 1) <= 0);
  ::close(fd);
  CHECK(store.get("before", core::Deadline::after(5s)) == "1");
  store.set("after", "2");
  CHECK(store.add("counter", 5) == 5);
}
