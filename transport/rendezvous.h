// Rendezvous: from an InitInfo (see discovery.h) to a connected Store, and the job token every
// connection handshake carries. Rank 0 hosts the TCP store server unless a launcher does; the
// Store returned owns that server, so rank 0 must outlive everyone's use of the store (end a
// job with a barrier before destroying it; destroying rank 0's store then keeps the server up
// until every other rank has hung up, for at most the store timeout).
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>

#include "core/deadline.h"
#include "transport/discovery.h"
#include "transport/store.h"
#include "transport/tcp_store.h"

namespace ringlet::transport {

// The store server of a job whose ranks reach it at addr:port, as rank 0 or a launcher hosts
// it: bound to addr when that is a loopback address (tcp::is_loopback_host), else to every
// interface ("::", which also takes IPv4 clients, or "0.0.0.0" where IPv6 is off), since the
// name other hosts use for this one may resolve to an address it cannot bind (a loopback
// alias). port 0 picks an ephemeral port. Throws core::Error naming the port it cannot bind.
std::unique_ptr<TcpStoreServer> host_tcp_store(const std::string& addr, int port,
                                               const std::string& port_name = "MASTER_PORT");

// source "tcp"/"env"/"slurm"/"ompi": rank 0 hosts the store on master_port (host_tcp_store)
// unless RINGLET_STORE_HOSTED=1 says the launcher hosts it; every rank, rank 0 included,
// connects a TcpStore client, retrying until `deadline`.
// source "file": a FileStore on file_path, deleted when all world_size ranks have closed it.
// `timeout` bounds each store call (see Store::set_timeout).
std::unique_ptr<Store> open_store(const InitInfo& info, core::Deadline deadline,
                                  const EnvLookup& env = process_env(),
                                  std::chrono::milliseconds timeout = kDefaultStoreTimeout);

// The 64-bit token that tells this job's connections from strangers. RINGLET_JOB_TOKEN (decimal
// or 0x-hex) if the launcher set it (rank 0 publishes it too); otherwise rank 0 draws one
// (core::random_u64) and publishes it under "ringlet/job_token", and the other ranks read it
// (until `deadline`).
std::uint64_t job_token(Store& store, int rank, core::Deadline deadline,
                        const EnvLookup& env = process_env());

}  // namespace ringlet::transport
