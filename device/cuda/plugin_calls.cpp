// Linked instead of the CUDA runtime itself when ringlet is built with CUDA: each entry point of
// device/cuda/device_runtime.h calls into the plugin (core/cuda_plugin.h), which holds the CUDA
// code and is loaded on the first call. Without a loadable plugin (no libcudart here),
// built_with_cuda() stays true, device_count() is 0 and device_runtime() throws DeviceError.
#include <ostream>

#include "core/cuda_plugin.h"
#include "core/dtype.h"
#include "core/error.h"
#include "device/counters.h"
#include "device/cuda/device_runtime.h"
#include "device/op_context.h"

namespace ringlet::device::cuda {
namespace {

// Every function of ringlet the plugin (the runtime, the tensor kernels, the collectives'
// kernels) calls back into: named here so that a program linking this file, as every program
// that loads the plugin does, also links them, and (-rdynamic) exports them for the plugin to
// bind to. A function of a layer above this one would be missing in programs without that
// layer: such a thing is passed to the plugin's entry point instead (ringlet_cuda_kernels).
[[gnu::used]] const void* const plugin_needs[] = {
    reinterpret_cast<const void*>(&core::error_location),
    reinterpret_cast<const void*>(&core::float_to_bf16),
    reinterpret_cast<const void*>(&core::float_to_half),
    reinterpret_cast<const void*>(
        static_cast<std::ostream& (*)(std::ostream&, core::DType)>(&core::operator<<)),
    reinterpret_cast<const void*>(&device::count_stream_ops),
    reinterpret_cast<const void*>(&device::count_host_sync),
    reinterpret_cast<const void*>(&device::count_driver_alloc),
    reinterpret_cast<const void*>(&device::wait_timeout),
    reinterpret_cast<const void*>(&device::current_op),
};

}  // namespace

bool built_with_cuda() { return true; }

int device_count() {
  if (!core::cuda_plugin_unavailable().empty()) return 0;
  static auto* const fn = core::cuda_plugin_function<int()>("ringlet_cuda_device_count");
  return fn();
}

Runtime& device_runtime(int index) {
  static auto* const fn = core::cuda_plugin_function<Runtime*(int)>("ringlet_cuda_device_runtime");
  return *fn(index);
}

}  // namespace ringlet::device::cuda
