// The rdma rendezvous through the store, and the endpoint record it exchanges.
#include <iomanip>
#include <sstream>

#include "core/error.h"
#include "transport/rdma/connection.h"
#include "transport/store.h"

namespace ringlet::transport::rdma {
namespace {

std::string gid_hex(const Gid& gid) {
  std::ostringstream out;
  for (const std::uint8_t byte : gid)
    out << std::hex << std::setw(2) << std::setfill('0') << int{byte};
  return out.str();
}

bool parse_gid(const std::string& text, Gid& gid) {
  if (text.size() != 32) return false;
  for (std::size_t i = 0; i < 16; ++i) {
    unsigned value = 0;
    for (std::size_t j = 0; j < 2; ++j) {
      const char c = text[2 * i + j];
      const int digit = c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
      if (digit < 0) return false;
      value = value * 16 + static_cast<unsigned>(digit);
    }
    gid[i] = static_cast<std::uint8_t>(value);
  }
  return true;
}

// Waits for `key`, turning the store's timeout into one that names the peer and the step.
std::string await(Store& store, const std::string& key, int local_rank, int peer_rank,
                  const char* step, core::Deadline deadline) {
  try {
    return store.get(key, deadline);
  } catch (const core::TimeoutError&) {
    RINGLET_THROW(TimeoutError, "rank ", local_rank, ": rdma peer rank ", peer_rank, " did not ",
                  step, " before the deadline");
  }
}

}  // namespace

std::string encode_endpoint(const RdmaEndpoint& e) {
  return core::str(e.qp.qp_num, " ", e.qp.psn, " ", e.qp.lid, " ", gid_hex(e.qp.gid), " ",
                   e.qp.mtu_bytes, " ", e.slots_addr, " ", e.slots_rkey, " ", e.slots, " ",
                   e.slot_bytes);
}

RdmaEndpoint decode_endpoint(const std::string& text, int peer_rank) {
  std::istringstream in(text);
  RdmaEndpoint e;
  std::string gid;
  in >> e.qp.qp_num >> e.qp.psn >> e.qp.lid >> gid >> e.qp.mtu_bytes >> e.slots_addr >>
      e.slots_rkey >> e.slots >> e.slot_bytes;
  const bool complete = !in.fail() && (in >> std::ws).eof();
  RINGLET_CHECK(
      complete && parse_gid(gid, e.qp.gid) && e.slots > 0 && e.slot_bytes > 0 && e.qp.mtu_bytes > 0,
      HandshakeError, "rdma: malformed endpoint record from rank ", peer_rank, ": '", text, "'");
  return e;
}

std::unique_ptr<Connection> connect_rdma(RdmaDevice& device, int local_rank, int peer_rank,
                                         Store& store, const std::string& prefix,
                                         core::Deadline deadline) {
  RINGLET_CHECK(local_rank >= 0 && peer_rank >= 0 && local_rank != peer_rank, ValueError,
                "connect_rdma: bad rank pair local ", local_rank, ", peer ", peer_rank);
  auto connection =
      std::make_unique<RdmaConnection>(*device.context, *device.registrations, device.gid_index,
                                       local_rank, peer_rank, rdma_options_from_env());
  const auto key = [&](const char* what, int from, int to) {
    return core::str(prefix, "/rdma/", what, "/", from, "-", to);
  };
  store.set(key("endpoint", local_rank, peer_rank), encode_endpoint(connection->local_endpoint()));
  const std::string remote = await(store, key("endpoint", peer_rank, local_rank), local_rank,
                                   peer_rank, "publish its queue pair", deadline);
  connection->connect(decode_endpoint(remote, peer_rank));
  // Neither side writes before the other's QP is ready to receive.
  store.set(key("ready", local_rank, peer_rank), "1");
  await(store, key("ready", peer_rank, local_rank), local_rank, peer_rank,
        "bring its queue pair up", deadline);
  return connection;
}

}  // namespace ringlet::transport::rdma
