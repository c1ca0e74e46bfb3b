// Which implementation serves a device.
#include "tensor/kernels/device_kernels.h"

#include "core/error.h"
#include "device/runtime.h"

namespace ringlet::tensor::kernels {

DeviceKernels& device_kernels(core::Device device) {
  RINGLET_CHECK(!device.is_cpu(), DeviceError,
                "device_kernels: cpu tensors run the CPU kernels (tensor/cpu)");
  device::check_device(device);
  return device.is_cuda() ? cuda_kernels() : emu_kernels();
}

}  // namespace ringlet::tensor::kernels
