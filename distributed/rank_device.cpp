// rank_device: a rank's device from --device and its local rank.
#include "distributed/rank_device.h"

#include "core/cuda_plugin.h"
#include "core/error.h"
#include "tensor/device/runtime.h"

namespace ringlet::distributed {

core::Device rank_device(const std::string& text, const transport::InitInfo& info) {
  core::Device device = core::parse_device(text);
  if (device.is_cpu() || text.find(':') != std::string::npos) return device;
  const int count = tensor::device::device_count(device.kind);
  RINGLET_CHECK(count > 0, DeviceError, "device ", text, ": none of that kind here",
                device.is_cuda() && !core::cuda_plugin_unavailable().empty()
                    ? " (CUDA is unavailable: " + core::cuda_plugin_unavailable() + ")"
                    : "");
  device.index = info.local_rank % count;
  return device;
}

}  // namespace ringlet::distributed
