// Linked instead of the CUDA code itself when ringlet is built with CUDA: each entry point of
// tensor/cuda/ calls into the plugin (core/cuda_plugin.h), which holds the CUDA code and is
// loaded on the first call. Without a loadable plugin (no libcudart here), cudnn_unavailable()
// says why and the rest throw DeviceError. The device runtime's entry points are
// device/cuda/plugin_calls.cpp's, as is the list of ringlet's functions the plugin binds to
// (every program that loads it links that file). The tensor layer's one setting the plugin reads,
// tensor_cores_allowed, is passed to it as a function.
#include "core/cuda_plugin.h"
#include "tensor/cuda/cudnn_conv.h"
#include "tensor/kernels/device_kernels.h"
#include "tensor/math_mode.h"

namespace ringlet::tensor::cuda {
namespace {

template <class Fn>
Fn* entry(const char* name) {
  return core::cuda_plugin_function<Fn>(name);
}

}  // namespace

const std::string& cudnn_unavailable() {
  if (!core::cuda_plugin_unavailable().empty()) return core::cuda_plugin_unavailable();
  static auto* const fn = entry<const std::string*()>("ringlet_cuda_cudnn_unavailable");
  return *fn();
}

using ConvPass = void(const CudnnShape&, const void*, const void*, void*, void*, int,
                      const Workspace&);

void cudnn_forward(const CudnnShape& s, const void* x, const void* w, void* y, void* stream,
                   int device, const Workspace& workspace) {
  static auto* const fn = entry<ConvPass>("ringlet_cuda_cudnn_forward");
  fn(s, x, w, y, stream, device, workspace);
}

void cudnn_backward_data(const CudnnShape& s, const void* w, const void* dy, void* dx, void* stream,
                         int device, const Workspace& workspace) {
  static auto* const fn = entry<ConvPass>("ringlet_cuda_cudnn_backward_data");
  fn(s, w, dy, dx, stream, device, workspace);
}

void cudnn_backward_filter(const CudnnShape& s, const void* x, const void* dy, void* dw,
                           void* stream, int device, const Workspace& workspace) {
  static auto* const fn = entry<ConvPass>("ringlet_cuda_cudnn_backward_filter");
  fn(s, x, dy, dw, stream, device, workspace);
}

}  // namespace ringlet::tensor::cuda

namespace ringlet::tensor::kernels {

DeviceKernels& cuda_kernels() {
  static auto* const fn =
      core::cuda_plugin_function<DeviceKernels*(bool (*)())>("ringlet_cuda_kernels");
  static DeviceKernels* const kernels = fn(&tensor_cores_allowed);
  return *kernels;
}

}  // namespace ringlet::tensor::kernels
