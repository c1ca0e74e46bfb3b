// Rendezvous: from an InitInfo (see discovery.h) to a connected Store, and the job token every
// connection handshake carries. Rank 0 hosts the TCP store server unless a launcher does; the
// Store returned owns that server, so rank 0 must outlive everyone's use of the store (end a
// job with a barrier before destroying it; destroying rank 0's store then keeps the server up
// until every other rank has hung up, for at most the store timeout).
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>

#include "core/deadline.h"
#include "transport/discovery.h"
#include "transport/store.h"
#include "transport/tcp_store.h"

namespace ringlet::transport {

// source "tcp"/"env"/"slurm"/"ompi": rank 0 starts a TcpStoreServer on master_port (bound to
// master_addr when that is a loopback address, else to every interface, since a host's own
// name may resolve to a loopback alias) unless RINGLET_STORE_HOSTED=1 says the launcher hosts
// it; every rank, rank 0 included, connects a TcpStore client, retrying until `deadline`.
// source "file": a FileStore on file_path, deleted when all world_size ranks have closed it.
// `timeout` bounds each store call (see Store::set_timeout).
std::unique_ptr<Store> open_store(const InitInfo& info, core::Deadline deadline,
                                  const EnvLookup& env = process_env(),
                                  std::chrono::milliseconds timeout = kDefaultStoreTimeout);

// The 64-bit token that tells this job's connections from strangers. RINGLET_JOB_TOKEN (decimal
// or 0x-hex) if the launcher set it; otherwise rank 0 draws one from std::random_device and
// publishes it under "ringlet/job_token", and the other ranks read it (until `deadline`).
std::uint64_t job_token(Store& store, int rank, core::Deadline deadline,
                        const EnvLookup& env = process_env());

}  // namespace ringlet::transport
