// join_from_environment: see distributed.h.
#include "trainer/distributed.h"

#include "core/error.h"
#include "tensor/device/runtime.h"
#include "transport/rendezvous.h"

namespace ringlet::trainer {

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

}  // namespace ringlet::trainer

namespace ringlet::trainer {

core::Device rank_device(const std::string& text, const transport::InitInfo& info) {
  core::Device device = core::parse_device(text);
  if (device.is_cpu() || text.find(':') != std::string::npos) return device;
  const int count = tensor::device::device_count(device.kind);
  RINGLET_CHECK(count > 0, DeviceError, "device ", text, ": none of that kind here");
  device.index = info.local_rank % count;
  return device;
}

void attach_device(DistributedContext& job, const std::string& name, core::Device device,
                   core::Deadline deadline) {
  job.space = DeviceSpace::create(*job.store, name, job.info.rank, job.info.world_size, device, {},
                                  deadline);
}

}  // namespace ringlet::trainer
