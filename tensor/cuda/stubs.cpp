// Linked instead of the CUDA library when ringlet is built without CUDA: every entry point
// throws NotBuiltError, so callers need no #ifdef.
#include "core/error.h"
#include "tensor/cuda/cudnn_conv.h"
#include "tensor/kernels/device_kernels.h"

namespace ringlet::tensor::cuda {
namespace {
[[noreturn]] void not_built(const char* what) {
  RINGLET_THROW(NotBuiltError, what, ": ringlet was built without CUDA (meson -Dcuda=enabled)");
}
}  // namespace

const std::string& cudnn_unavailable() {
  static const std::string why = "this build has no CUDA";
  return why;
}
void cudnn_forward(const CudnnShape&, const void*, const void*, void*, void*, int,
                   const Workspace&) {
  not_built("cuda::cudnn_forward");
}
void cudnn_backward_data(const CudnnShape&, const void*, const void*, void*, void*, int,
                         const Workspace&) {
  not_built("cuda::cudnn_backward_data");
}
void cudnn_backward_filter(const CudnnShape&, const void*, const void*, void*, void*, int,
                           const Workspace&) {
  not_built("cuda::cudnn_backward_filter");
}

}  // namespace ringlet::tensor::cuda

namespace ringlet::tensor::kernels {

DeviceKernels& cuda_kernels() {
  RINGLET_THROW(NotBuiltError,
                "cuda kernels: ringlet was built without CUDA (meson -Dcuda=enabled)");
}

}  // namespace ringlet::tensor::kernels
