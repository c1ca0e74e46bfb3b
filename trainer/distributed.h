// Joining a distributed job from the environment a launcher set (torchrun's variables, Slurm,
// Open MPI): discovery, the store, the job token and a Communicator, in one call. Used by
// `ringlet train` workers and by bench/train_bench --nproc.
#pragma once

#include <memory>
#include <string>

#include "collectives/communicator.h"
#include "trainer/device_space.h"
#include "transport/discovery.h"
#include "transport/store.h"

namespace ringlet::trainer {

struct DistributedContext {
  transport::InitInfo info;
  std::unique_ptr<transport::Store> store;  // outlives comm (declared first, destroyed last)
  std::unique_ptr<DeviceSpace> space;       // outlives comm too: its progress thread uses it
  std::unique_ptr<collectives::Communicator> comm;
};

// `name` namespaces the communicator's store keys. Throws naming the variable or peer that
// was missing when the deadline passes.
DistributedContext join_from_environment(const std::string& name, core::Deadline deadline);

// The device this rank computes on for a --device of `text`: as given when it names an index
// ("emu:1"); otherwise ("cuda", "emu") device local_rank % the devices of that kind, so N local
// ranks spread over the devices, several per device when there are fewer devices than ranks.
core::Device rank_device(const std::string& text, const transport::InitInfo& info);
// Gives the job a device space on `device` (collective: every rank calls it).
void attach_device(DistributedContext& job, const std::string& name, core::Device device,
                   core::Deadline deadline);

}  // namespace ringlet::trainer
