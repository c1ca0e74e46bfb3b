// Mesh construction: listen, publish, read everyone's address, then connect pair by pair in
// increasing peer order (a global order over pairs, so setup cannot deadlock).
#include "transport/mesh.h"

#include <optional>
#include <sstream>

#include "core/env.h"
#include "core/log.h"
#include "transport/rdma/connection.h"
#include "transport/rdma/device.h"
#include "transport/shm/connection.h"
#include "transport/tcp/connection.h"
#include "transport/tcp/interfaces.h"
#include "transport/tcp/listener.h"

namespace ringlet::transport {
namespace {

struct PeerInfo {
  std::string host;
  int port = 0;
  std::string process;  // shm's process_token(): a peer on this host can watch it
  std::string identity;
};

// This rank's address record, as parse_peer reads it: "address port process identity".
std::string address_record(const std::string& address, int port, const std::string& identity) {
  return core::str(address, " ", port, " ", process_token(), " ", identity);
}

PeerInfo parse_peer(const std::string& value, int rank) {
  std::istringstream in(value);
  PeerInfo info;
  in >> info.host >> info.port >> info.process;
  std::getline(in >> std::ws, info.identity);
  RINGLET_CHECK(!in.bad() && !info.host.empty() && info.port > 0, ValueError,
                "mesh: malformed address record for rank ", rank, ": '", value, "'");
  return info;
}

std::string resolve_transport(const std::string& given) {
  std::string t = given.empty() ? core::env_string("RINGLET_TRANSPORT").value_or("auto") : given;
  RINGLET_CHECK(t == "auto" || t == "tcp" || t == "shm" || t == "rdma", ValueError,
                "RINGLET_TRANSPORT='", t, "' is not one of auto, tcp, shm, rdma");
  return t;
}

std::optional<std::string> try_get(Store& store, const std::string& key) {
  try {
    return store.get(key, core::Deadline::after(std::chrono::milliseconds(0)));
  } catch (const core::TimeoutError&) {
    return std::nullopt;
  }
}

// Every rank must be started with the same world size: the first to arrive records its own,
// and a rank that disagrees fails, publishing why so that the others stop waiting too.
void check_world_size(Store& store, const MeshOptions& o) {
  const std::string mine = std::to_string(o.world_size);
  const std::string recorded = store.compare_set(o.prefix + "/world_size", "", mine);
  if (recorded == mine) return;
  const std::string why = core::str("rank ", o.rank, " was started with world size ", o.world_size,
                                    " but another rank registered world size ", recorded,
                                    " first: every rank must get the same WORLD_SIZE");
  store.compare_set(o.prefix + "/setup_error", "", why);
  RINGLET_THROW(ValueError, "mesh: ", why);
}

// A second process that claims a rank of this job (a process started by hand into a job under
// way, or two given one RANK) is refused before it publishes anything, naming the job; the
// process that holds the rank goes on undisturbed. (The same process may build its mesh again.)
void claim_rank(Store& store, const MeshOptions& o) {
  const std::string me = process_token();
  const std::string holder = store.compare_set(core::str(o.prefix, "/holder/", o.rank), "", me);
  if (holder == me) return;
  RINGLET_THROW(ValueError, "mesh: rank ", o.rank, " of the job '", o.prefix, "' (", o.world_size,
                " ranks", o.store_host.empty() ? "" : ", store on " + o.store_host,
                ") is already held by process ", holder.substr(0, holder.find('/')),
                ": this process cannot join a job under way. Start a new job (another "
                "MASTER_PORT), or give each process its own RANK");
}

// Before this rank publishes anything: the job's world size, and the rank not held already.
void check_joining(Store& store, const MeshOptions& o) {
  check_world_size(store, o);
  claim_rank(store, o);
}

// The ranks of keys not published yet, as "3, 7, 12" (at most the first 16 named).
std::string missing_ranks(Store& store, const std::vector<std::string>& keys, int& count) {
  std::string missing;
  count = 0;
  for (std::size_t r = 0; r < keys.size(); ++r) {
    if (try_get(store, keys[r])) continue;
    if (++count <= 16) missing += (missing.empty() ? "" : ", ") + std::to_string(r);
  }
  if (count > 16) missing += ", ...";
  return missing;
}

// Waits until every rank has published its address. Fails early when a rank published a
// setup error, and at the deadline names the ranks that never arrived. Rank 0 says every 5 s
// how many have arrived, so a slow start is never silent.
void wait_for_ranks(Store& store, const MeshOptions& o, const std::vector<std::string>& keys,
                    core::Deadline deadline) {
  const auto started = core::Deadline::Clock::now();
  auto next_report = started + std::chrono::seconds(5);
  while (true) {
    const auto step = std::min<core::Deadline::Clock::duration>(deadline.remaining(),
                                                                std::chrono::milliseconds(250));
    try {
      store.wait(keys, core::Deadline::after(step));
      return;
    } catch (const core::TimeoutError&) {
    }
    if (const auto error = try_get(store, o.prefix + "/setup_error")) {
      RINGLET_THROW(ValueError, "mesh: rank ", o.rank, " stops: ", *error);
    }
    int absent = 0;
    if (o.rank == 0 && core::Deadline::Clock::now() >= next_report) {
      next_report += std::chrono::seconds(5);
      const std::string missing = missing_ranks(store, keys, absent);
      core::log(core::LogLevel::warn, "mesh: rank 0 waiting: ", o.world_size - absent, " of ",
                o.world_size, " ranks arrived (missing: ", missing, ")");
    }
    if (!deadline.expired()) continue;
    const std::string missing = missing_ranks(store, keys, absent);
    const auto waited = std::chrono::duration_cast<std::chrono::milliseconds>(
        core::Deadline::Clock::now() - started);
    RINGLET_THROW(TimeoutError, "mesh: rank ", o.rank, " waited ", waited.count(),
                  " ms and rank(s) ", missing, " of a world of ", o.world_size,
                  " never arrived (were they started, with the same MASTER_ADDR, MASTER_PORT and "
                  "WORLD_SIZE?)");
  }
}

// The link layer in a published rdma device record ("NAME roce"), or "" for "-" (none).
std::string link_layer_of(const std::string& device) {
  const std::size_t space = device.rfind(' ');
  return space == std::string::npos ? std::string() : device.substr(space + 1);
}

// RINGLET_TRANSPORT=auto between hosts: rdma when this rank (`my_link`) and `peer` both found a
// device of the same link layer (InfiniBand does not talk to RoCE).
bool both_have_rdma(Store& store, const MeshOptions& o, int peer, const std::string& my_link,
                    core::Deadline deadline) {
  return !my_link.empty() &&
         my_link == link_layer_of(store.get(core::str(o.prefix, "/rdma_device/", peer), deadline));
}

}  // namespace

std::unique_ptr<Mesh> Mesh::connect(Store& store, MeshOptions o, core::Deadline deadline) {
  RINGLET_CHECK(o.world_size >= 1 && o.rank >= 0 && o.rank < o.world_size, ValueError,
                "mesh: rank ", o.rank, " is outside a world of ", o.world_size);
  const std::string transport = resolve_transport(o.transport);
  const int nsocks =
      o.nsocks > 0
          ? o.nsocks
          : static_cast<int>(core::env_int("RINGLET_NSOCKS", kDefaultSocketsPerPeer, 1, 64));
  const std::string ifname =
      o.ifname.empty() ? core::env_string("RINGLET_SOCKET_IFNAME").value_or("") : o.ifname;

  if (o.tcp.socket_buffer_bytes == 0) {
    o.tcp.socket_buffer_bytes =
        static_cast<int>(core::env_int("RINGLET_SOCKET_BUFFER", 0, 0, 1 << 30));
  }
  check_joining(store, o);
  std::unique_ptr<Mesh> mesh(new Mesh());
  mesh->rank_ = o.rank;
  mesh->peers_.resize(o.world_size);
  const tcp::Interface iface = tcp::select_interface(ifname, o.store_host);
  mesh->listener_ =
      std::make_unique<tcp::Listener>(iface.address, o.port, o.job_token, o.rank, o.world_size);
  const std::string identity = o.host_id.empty() ? host_identity() : o.host_id;
  std::string my_link;
  if (transport == "auto") {  // before the address, so a peer that sees one sees both
    const std::string device = rdma::hardware_rdma_device();
    store.set(core::str(o.prefix, "/rdma_device/", o.rank), device.empty() ? "-" : device);
    my_link = link_layer_of(device);
  }
  store.set(core::str(o.prefix, "/addr/", o.rank),
            address_record(iface.address, mesh->listener_->port(), identity));

  std::vector<std::string> keys;
  for (int r = 0; r < o.world_size; ++r) keys.push_back(core::str(o.prefix, "/addr/", r));
  wait_for_ranks(store, o, keys, deadline);

  std::ostringstream summary;
  mesh->hosts_.assign(o.world_size, identity);
  for (int p = 0; p < o.world_size; ++p) {
    if (p == o.rank) continue;
    const PeerInfo info = parse_peer(store.get(keys[p], deadline), p);
    mesh->hosts_[p] = info.identity;
    const bool same_host = info.identity == identity;
    RINGLET_CHECK(transport != "shm" || same_host, ValueError, "RINGLET_TRANSPORT=shm but rank ", p,
                  " is on another host (", info.host, ")");
    if (same_host && transport != "tcp" && transport != "rdma") {
      mesh->peers_[p] = connect_shm(o.rank, p, store, o.prefix, deadline, info.process);
      summary << " " << p << ":shm";
      continue;
    }
    if (transport == "rdma" ||
        (transport == "auto" && both_have_rdma(store, o, p, my_link, deadline))) {
      if (!mesh->rdma_) mesh->rdma_ = rdma::open_rdma_device();
      mesh->peers_[p] = rdma::connect_rdma(*mesh->rdma_, o.rank, p, store, o.prefix, deadline);
      summary << " " << p << ":rdma";
      continue;
    }
    std::vector<int> fds;
    for (int i = 0; i < nsocks; ++i) {
      if (o.rank > p) {
        tcp::Hello hello;
        hello.job_token = o.job_token;
        hello.rank = static_cast<std::uint32_t>(o.rank);
        hello.peer_rank = static_cast<std::uint32_t>(p);
        hello.socket_index = static_cast<std::uint32_t>(i);
        hello.socket_count = static_cast<std::uint32_t>(nsocks);
        fds.push_back(tcp::connect_socket(info.host, info.port, hello, deadline));
      } else {
        fds.push_back(mesh->listener_->take(p, i, deadline));
      }
    }
    mesh->peers_[p] = std::make_unique<tcp::TcpConnection>(o.rank, p, fds, o.tcp);
    summary << " " << p << ":tcp";
  }
  core::log(core::LogLevel::info, "rank ", o.rank, ": listening on ",
            tcp::endpoint_str(iface.address, mesh->listener_->port()), " (", iface.name, "), ",
            nsocks, " socket(s) per tcp peer; peers:", summary.str(),
            mesh->rdma_ ? "; rdma device " + mesh->rdma_->describe() : "");
  return mesh;
}

Mesh::~Mesh() = default;

std::unique_ptr<Mesh> Mesh::over(int rank, int size, Dialer dial) {
  std::unique_ptr<Mesh> mesh(new Mesh());
  mesh->rank_ = rank;
  mesh->peers_.resize(static_cast<std::size_t>(size));
  mesh->dial_ = std::move(dial);
  return mesh;
}

Connection& Mesh::peer(int rank) {
  RINGLET_CHECK(rank >= 0 && rank < size() && rank != rank_, ValueError, "mesh: rank ", rank_,
                " has no connection to rank ", rank, " (world size ", size(), ")");
  if (!peers_[rank] && dial_) peers_[rank] = dial_(rank);
  return *peers_[rank];
}

std::string Mesh::listen_endpoint() const {
  if (!listener_) return "";
  return tcp::endpoint_str(listener_->address(), listener_->port());
}

const std::string& Mesh::host_of(int rank) const {
  RINGLET_CHECK(rank >= 0 && rank < size(), ValueError, "mesh: no rank ", rank, " in a world of ",
                size());
  static const std::string none;
  return hosts_.empty() ? none : hosts_[rank];
}

std::uint64_t Mesh::refused_connections() const { return listener_ ? listener_->refused() : 0; }

}  // namespace ringlet::transport
