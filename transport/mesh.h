// Mesh: one Connection from this rank to every other rank of a group, built through a Store.
// Each rank listens (tcp) and publishes "address port process host-identity" under the mesh prefix
// (process: shm's process_token(), which a peer on the host watches while it waits for it);
// a pair on the same host (the same host_identity()) uses shm unless RINGLET_TRANSPORT=tcp,
// otherwise rdma when both ranks have an RDMA device (libibverbs), else tcp with
// RINGLET_NSOCKS sockets (the higher rank dials the lower one). RINGLET_TRANSPORT=rdma uses
// rdma for every pair (RINGLET_IB_DEVICE=emu0: the emulated device, one host). Pairs are
// set up in one global order, so no two ranks wait on each other in a cycle. The choice is
// logged once per rank. The listener stays up to refuse strangers for the mesh's lifetime.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "core/deadline.h"
#include "transport/connection.h"
#include "transport/store.h"
#include "transport/tcp_options.h"

namespace ringlet::transport {

namespace tcp {
class Listener;
}
namespace rdma {
struct RdmaDevice;
}

struct MeshOptions {
  int rank = 0;
  int world_size = 1;
  std::string prefix = "mesh";  // store key namespace, unique per mesh in a job
  std::uint64_t job_token = 0;
  std::string transport;   // "auto" (default), "tcp", "shm" or "rdma"; empty = RINGLET_TRANSPORT
  int nsocks = 0;          // sockets per tcp peer; 0 = RINGLET_NSOCKS or the default
  std::string ifname;      // NCCL syntax; empty = RINGLET_SOCKET_IFNAME
  std::string store_host;  // where the store lives: a loopback store means a loopback job
  int port = 0;            // tcp listen port (0 = ephemeral)
  std::string host_id;     // which host this rank is on; empty = host_identity() (tests set it)
  tcp::TcpOptions tcp;
};

// Two sockets per tcp peer: on 2 cores p2p_perf streams 64 MiB at ~87% of iperf3 with 2
// (~4.1 GB/s), ~49% with 1, no better with 4 (see bench/README.md).
inline constexpr int kDefaultSocketsPerPeer = 2;

class Mesh {
 public:
  static std::unique_ptr<Mesh> connect(Store& store, MeshOptions options, core::Deadline deadline);
  // A mesh over connections made elsewhere (the simulated network, model/): `dial(peer)` makes
  // this rank's connection to `peer` when it is first used, on the thread that uses it. No
  // listener, and no host names (host_of is "").
  using Dialer = std::function<std::unique_ptr<Connection>(int peer)>;
  static std::unique_ptr<Mesh> over(int rank, int size, Dialer dial);
  ~Mesh();

  int rank() const { return rank_; }
  int size() const { return static_cast<int>(peers_.size()); }
  Connection& peer(int rank);
  // The listen endpoint ("host:port") other ranks dial; empty for a mesh made over().
  std::string listen_endpoint() const;
  std::uint64_t refused_connections() const;
  // The host `rank` published (its own included): ranks with equal identities share a host.
  const std::string& host_of(int rank) const;

 private:
  Mesh() = default;
  int rank_ = 0;
  std::unique_ptr<tcp::Listener> listener_;
  std::vector<std::string> hosts_;                  // host_of, by rank
  std::unique_ptr<rdma::RdmaDevice> rdma_;          // opened for the first rdma peer
  std::vector<std::unique_ptr<Connection>> peers_;  // null at rank_ (destroyed before rdma_)
  Dialer dial_;                                     // over(): makes peers_ on first use
};

}  // namespace ringlet::transport
