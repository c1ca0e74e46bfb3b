// Linked instead of the CUDA library when ringlet is built without CUDA: every entry point
// throws NotBuiltError, so callers need no #ifdef.
#include "core/error.h"
#include "tensor/cuda/device_runtime.h"
#include "tensor/cuda/runtime.h"
#include "tensor/kernels/device_kernels.h"

namespace ringlet::tensor::cuda {
namespace {
[[noreturn]] void not_built(const char* what) {
  RINGLET_THROW(NotBuiltError, what, ": ringlet was built without CUDA (meson -Dcuda=enabled)");
}
}  // namespace

bool built_with_cuda() { return false; }
int device_count() { not_built("cuda::device_count"); }
void* device_malloc(std::size_t, int) { not_built("cuda::device_malloc"); }
void device_free(void*, int) { not_built("cuda::device_free"); }
void copy_host_to_device(void*, const void*, std::size_t, int) { not_built("cuda::copy"); }
void copy_device_to_host(void*, const void*, std::size_t, int) { not_built("cuda::copy"); }
void copy_device_to_device(void*, const void*, std::size_t, int) { not_built("cuda::copy"); }
void synchronize(int) { not_built("cuda::synchronize"); }
void add_f32(float*, const float*, const float*, std::size_t, int) { not_built("cuda::add_f32"); }
device::Runtime& device_runtime(int) { not_built("cuda::device_runtime"); }

}  // namespace ringlet::tensor::cuda

namespace ringlet::tensor::kernels {

DeviceKernels& cuda_kernels() {
  RINGLET_THROW(NotBuiltError,
                "cuda kernels: ringlet was built without CUDA (meson -Dcuda=enabled)");
}

}  // namespace ringlet::tensor::kernels
