// Plain C++ face of the CUDA runtime for the tensor layer: no CUDA headers here, so host code
// compiles without the toolkit. Built with CUDA, these call cudart; built without, every
// function but device_count() throws NotBuiltError("built without CUDA").
// device_count() returns 0 when CUDA is built in but no usable GPU/driver is present, and
// throws NotBuiltError when CUDA was not built.
#pragma once

#include <cstddef>

namespace ringlet::tensor::cuda {

bool built_with_cuda();
int device_count();
// nullptr when the device is out of memory (the caching allocator then frees what it holds and
// tries again); any other failure throws.
void* device_malloc(std::size_t bytes, int device);
void device_free(void* ptr, int device);
void copy_host_to_device(void* dst, const void* src, std::size_t bytes, int device);
void copy_device_to_host(void* dst, const void* src, std::size_t bytes, int device);
void copy_device_to_device(void* dst, const void* src, std::size_t bytes, int device);

// Waits until all work queued on `device` is done (kernels, asynchronous copies).
void synchronize(int device);

// out[i] = a[i] + b[i] for n contiguous f32 elements on `device` (synchronous).
void add_f32(float* out, const float* a, const float* b, std::size_t n, int device);

}  // namespace ringlet::tensor::cuda
