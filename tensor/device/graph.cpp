// Graph: the runtime's capture around `work`, the allocator's pool around that, both ended
// whatever `work` does.
#include "tensor/device/graph.h"

#include <exception>

#include "core/error.h"
#include "tensor/device/allocator.h"

namespace ringlet::tensor {

std::unique_ptr<Graph> Graph::capture(const device::Stream& stream,
                                      const std::function<void()>& work) {
  const Device device = stream.device();
  device::Runtime& rt = device::runtime(device);
  DeviceAllocator& allocator = device_allocator(device);
  const int pool = allocator.begin_capture(stream.handle());
  device::GraphHandle handle = nullptr;
  try {
    rt.begin_capture(stream.handle());
  } catch (...) {
    allocator.end_capture();
    allocator.release_pool(pool);
    throw;
  }
  std::exception_ptr failed;
  try {
    const device::StreamGuard on(stream);
    work();
  } catch (...) {
    failed = std::current_exception();
  }
  try {
    handle = rt.end_capture(stream.handle());
  } catch (...) {
    if (!failed) failed = std::current_exception();
  }
  allocator.end_capture();
  if (failed) {
    if (handle != nullptr) rt.destroy_graph(handle);
    allocator.release_pool(pool);
    std::rethrow_exception(failed);
  }
  return std::unique_ptr<Graph>(new Graph(stream, handle, pool));
}

Graph::Graph(device::Stream stream, device::GraphHandle handle, int pool)
    : stream_(std::move(stream)), handle_(handle), pool_(pool) {}

Graph::~Graph() {
  device::runtime(stream_.device()).destroy_graph(handle_);
  device_allocator(stream_.device()).release_pool(pool_);
}

void Graph::replay() const {
  device::runtime(stream_.device()).launch_graph(handle_, stream_.handle());
}

bool capturing(core::Device device) {
  return !device.is_cpu() && device::runtime(device).capturing();
}

}  // namespace ringlet::tensor
