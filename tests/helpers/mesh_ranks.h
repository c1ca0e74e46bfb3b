// Test helpers for multi-rank transport tests: run N ranks as threads over a MemoryStore, and a
// forked peer process that joins a Mesh through a TcpStore on loopback.
#pragma once

#include <doctest/doctest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <exception>
#include <functional>
#include <thread>
#include <vector>

#include "memory_store.h"
#include "transport/mesh.h"
#include "transport/tcp_store.h"

namespace ringlet::testing {

using namespace std::chrono_literals;

inline transport::MeshOptions mesh_options(int rank, int world, const std::string& transport,
                                           const std::string& prefix) {
  transport::MeshOptions o;
  o.rank = rank;
  o.world_size = world;
  o.transport = transport;
  o.prefix = prefix;
  o.job_token = 77;
  o.store_host = "127.0.0.1";
  return o;
}

// Runs body(rank, mesh) on `world` threads, each with its own Mesh; rethrows the first error.
inline void run_ranks(int world, const std::string& transport, const std::string& prefix,
                      const std::function<void(int, transport::Mesh&)>& body) {
  MemoryStore store;
  std::vector<std::exception_ptr> errors(world);
  std::vector<std::thread> threads;
  for (int r = 0; r < world; ++r) {
    threads.emplace_back([&, r] {
      try {
        auto mesh = transport::Mesh::connect(store, mesh_options(r, world, transport, prefix),
                                             core::Deadline::after(30s));
        body(r, *mesh);
        transport::store_barrier(store, prefix + "/end", world, core::Deadline::after(60s));
      } catch (...) {
        errors[r] = std::current_exception();
      }
    });
  }
  for (auto& t : threads) t.join();
  for (auto& e : errors) {
    if (e) std::rethrow_exception(e);
  }
}

// Forks a child that runs child_body(store_port) and _exits with its status (0 = success);
// the parent gets the pid and the port of the store it hosts for the pair.
struct ForkedPeer {
  pid_t pid = -1;
  std::unique_ptr<transport::TcpStoreServer> server;
  int port = 0;
};

inline ForkedPeer fork_peer(const std::function<int(int store_port)>& child_body) {
  int pipefd[2];
  REQUIRE(::pipe(pipefd) == 0);
  ForkedPeer peer;
  peer.pid = ::fork();
  REQUIRE(peer.pid >= 0);
  if (peer.pid == 0) {  // child: no threads of the parent exist here; build everything anew
    ::close(pipefd[1]);
    int port = 0;
    const bool ok = ::read(pipefd[0], &port, sizeof port) == static_cast<ssize_t>(sizeof port);
    int status = 3;
    try {
      status = ok ? child_body(port) : 4;
    } catch (const std::exception& e) {
      std::fprintf(stderr, "forked peer: %s\n", e.what());
      status = 5;
    }
    ::_exit(status);
  }
  ::close(pipefd[0]);
  peer.server = std::make_unique<transport::TcpStoreServer>("127.0.0.1", 0);
  peer.port = peer.server->port();
  REQUIRE(::write(pipefd[1], &peer.port, sizeof peer.port) ==
          static_cast<ssize_t>(sizeof peer.port));
  ::close(pipefd[1]);
  return peer;
}

// Waits (bounded) for the child; returns its exit status, or -signal if killed.
inline int wait_child(pid_t pid, std::chrono::seconds limit = 60s) {
  const auto end = std::chrono::steady_clock::now() + limit;
  int status = 0;
  while (std::chrono::steady_clock::now() < end) {
    const pid_t done = ::waitpid(pid, &status, WNOHANG);
    if (done == pid) return WIFEXITED(status) ? WEXITSTATUS(status) : -WTERMSIG(status);
    std::this_thread::sleep_for(10ms);
  }
  ::kill(pid, SIGKILL);
  ::waitpid(pid, &status, 0);
  FAIL("child process ", pid, " did not finish within the limit");
  return -1;
}

}  // namespace ringlet::testing
