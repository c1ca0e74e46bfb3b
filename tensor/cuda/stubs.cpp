// Linked instead of the CUDA library when ringlet is built without CUDA: every entry point
// throws NotBuiltError, so callers need no #ifdef.
#include "core/error.h"
#include "tensor/cuda/device_runtime.h"
#include "tensor/kernels/device_kernels.h"

namespace ringlet::tensor::cuda {
namespace {
[[noreturn]] void not_built(const char* what) {
  RINGLET_THROW(NotBuiltError, what, ": ringlet was built without CUDA (meson -Dcuda=enabled)");
}
}  // namespace

bool built_with_cuda() { return false; }
int device_count() { not_built("cuda::device_count"); }
device::Runtime& device_runtime(int) { not_built("cuda::device_runtime"); }

}  // namespace ringlet::tensor::cuda

namespace ringlet::tensor::kernels {

DeviceKernels& cuda_kernels() {
  RINGLET_THROW(NotBuiltError,
                "cuda kernels: ringlet was built without CUDA (meson -Dcuda=enabled)");
}

}  // namespace ringlet::tensor::kernels
