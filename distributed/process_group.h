// Joining a distributed job from the environment a launcher set (torchrun's variables, Slurm,
// Open MPI): discovery, the store, the job token and a Communicator, in one call. Used by
// `ringlet train` workers and by bench/train_bench --nproc.
#pragma once

#include <memory>
#include <string>

#include "collectives/buffer_space.h"
#include "collectives/communicator.h"
#include "distributed/rank_device.h"
#include "transport/discovery.h"
#include "transport/store.h"

namespace ringlet::distributed {

struct DistributedContext {
  transport::InitInfo info;
  std::unique_ptr<transport::Store> store;  // outlives comm (declared first, destroyed last)
  // attach_device's space (collectives/device_space.h), for DDP's options and the collectives'
  // `space` argument; it outlives comm too: comm's progress thread uses it.
  std::unique_ptr<collectives::BufferSpace> space;
  std::unique_ptr<collectives::Communicator> comm;
};

// `name` namespaces the communicator's store keys. Throws naming the variable or peer that
// was missing when the deadline passes.
DistributedContext join_from_environment(const std::string& name, core::Deadline deadline);

// Gives the job a device space on `device` (collective: every rank calls it).
void attach_device(DistributedContext& job, const std::string& name, core::Device device,
                   core::Deadline deadline);

}  // namespace ringlet::distributed
