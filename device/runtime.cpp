// Which runtime serves a device: the emulator's for emu:N, cudart's for cuda:N. Runtimes are
// created on first use and never destroyed (their streams' threads and the CUDA context must
// outlive every tensor, including static ones).
#include "device/runtime.h"

#include <array>
#include <atomic>
#include <mutex>

#include "core/cuda_plugin.h"
#include "core/env.h"
#include "core/error.h"
#include "device/cuda/device_runtime.h"
#include "device/emu/emu_runtime.h"

namespace ringlet::device {
namespace {

constexpr int kMaxDevices = 16;

std::string existing_devices() {
  std::string out = "cpu";
  for (int i = 0; i < device_count(Device::Kind::emu); ++i) out += ", emu:" + std::to_string(i);
  int gpus = 0;
  try {
    gpus = device_count(Device::Kind::cuda);
  } catch (const core::NotBuiltError&) {
    out += " (this build has no CUDA)";
  }
  for (int i = 0; i < gpus; ++i) out += ", cuda:" + std::to_string(i);
  if (gpus == 0 && cuda::built_with_cuda() && !core::cuda_plugin_unavailable().empty())
    out += " (CUDA is unavailable: " + core::cuda_plugin_unavailable() + ")";
  return out;
}

}  // namespace

namespace {
std::atomic<std::int64_t>& timeout_ms() {
  static std::atomic<std::int64_t> ms{
      core::env_int("RINGLET_DEVICE_TIMEOUT", 300, 1, 7 * 24 * 3600) * 1000};
  return ms;
}
}  // namespace

std::chrono::milliseconds wait_timeout() { return std::chrono::milliseconds(timeout_ms().load()); }
void set_wait_timeout(std::chrono::milliseconds timeout) { timeout_ms().store(timeout.count()); }

int device_count(Device::Kind kind) {
  switch (kind) {
    case Device::Kind::cpu: return 1;
    case Device::Kind::cuda: return std::min(cuda::device_count(), kMaxDevices);
    case Device::Kind::emu: {
      static const int count =
          static_cast<int>(core::env_int("RINGLET_EMU_DEVICES", 2, 0, kMaxDevices));
      return count;
    }
  }
  return 0;
}

int usable_gpu_count() {
  try {
    return device_count(Device::Kind::cuda);
  } catch (const core::NotBuiltError&) {
    return 0;
  }
}

void check_device(Device device) {
  int count = 0;
  try {
    count = device_count(device.kind);
  } catch (const core::NotBuiltError&) {
    RINGLET_THROW(DeviceError, "device ", device,
                  " does not exist: this build has no CUDA (devices: ", existing_devices(), ")");
  }
  RINGLET_CHECK(device.index >= 0 && device.index < count, DeviceError, "device ", device,
                " does not exist (devices: ", existing_devices(), ")");
}

Runtime& runtime(Device device) {
  check_device(device);
  RINGLET_CHECK(!device.is_cpu(), DeviceError, "the host (cpu) has no device runtime");
  if (device.is_cuda()) return cuda::device_runtime(device.index);
  static std::array<std::once_flag, kMaxDevices> once;
  static std::array<emu::EmuRuntime*, kMaxDevices> emulated{};
  std::call_once(once[static_cast<std::size_t>(device.index)], [&] {
    emulated[static_cast<std::size_t>(device.index)] = new emu::EmuRuntime(device.index);
  });
  return *emulated[static_cast<std::size_t>(device.index)];
}

}  // namespace ringlet::device
