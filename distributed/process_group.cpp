// join_from_environment: see distributed.h.
#include "distributed/process_group.h"

#include "core/error.h"
#include "device/runtime.h"
#include "collectives/device_space.h"
#include "transport/rendezvous.h"

namespace ringlet::distributed {

DistributedContext join_from_environment(const std::string& name, core::Deadline deadline) {
  DistributedContext ctx;
  ctx.info = transport::discover({});
  ctx.store = transport::open_store(ctx.info, deadline);
  transport::MeshOptions mesh;
  mesh.rank = ctx.info.rank;
  mesh.world_size = ctx.info.world_size;
  mesh.prefix = name;
  mesh.job_token = transport::job_token(*ctx.store, ctx.info.rank, deadline);
  mesh.store_host = ctx.info.master_addr;
  collectives::CommOptions options;
  options.name = name;
  ctx.comm = collectives::Communicator::create(*ctx.store, mesh, options, deadline);
  return ctx;
}

}  // namespace ringlet::distributed

namespace ringlet::distributed {

void attach_device(DistributedContext& job, const std::string& name, core::Device device,
                   core::Deadline deadline) {
  job.space = collectives::DeviceSpace::create(*job.store, name, job.info.rank, job.info.world_size,
                                               device, {}, deadline);
}

}  // namespace ringlet::distributed
