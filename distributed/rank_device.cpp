// rank_device: a rank's device from --device and its local rank.
#include "distributed/rank_device.h"

#include "core/error.h"
#include "device/runtime.h"

namespace ringlet::distributed {

core::Device rank_device(const std::string& text, const transport::InitInfo& info) {
  core::Device device = core::parse_device(text);
  if (device.is_cpu() || text.find(':') != std::string::npos) return device;
  const int count = device::device_count(device.kind);
  device.index = 0;
  if (count == 0) device::check_device(device);  // throws, naming the devices here and why
  device.index = info.local_rank % count;
  return device;
}

}  // namespace ringlet::distributed
