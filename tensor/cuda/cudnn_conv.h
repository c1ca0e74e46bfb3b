// Convolutions through cuDNN, for conv2d's fast path on a GPU: f32 NCHW, no bias (the op adds it
// in its epilogue kernel). cuDNN is loaded at run time (dlopen of libcudnn.so.9), so a binary
// built here starts on a machine without it and falls back to the in-house kernels there.
// Each pass (forward, data gradient, filter gradient) runs the algorithm cuDNN's search found
// fastest for its shape, searched once per shape (as torch.backends.cudnn.benchmark) outside any
// graph capture (a capture meeting a new shape takes cuDNN's heuristic choice instead), on
// tensor cores when tensor_cores_allowed() says so at that call (tensor/math_mode.h).
// Plain C++ header: no CUDA or cuDNN types. Built without CUDA, cudnn_unavailable() says so.
#pragma once

#include <cstddef>
#include <functional>
#include <string>

namespace ringlet::tensor::cuda {

struct CudnnShape {
  int n, c, h, w;  // input
  int o, kh, kw;   // weight [o, c, kh, kw]
  int stride_h, stride_w, pad_h, pad_w, dilation_h, dilation_w;
  int out_h, out_w;
  bool tensor_cores;
  bool operator==(const CudnnShape&) const = default;
};

// "" when cuDNN is usable here, else why not (a build without CUDA, no libcudnn.so.9 to load,
// RINGLET_CUDNN=0).
const std::string& cudnn_unavailable();

// Device memory of at least `bytes` for one call, kept until the call has been queued.
using Workspace = std::function<void*(std::size_t bytes)>;

// y = conv(x, w); dx = conv's data gradient from dy; dw = its filter gradient. Queued on
// `stream` (a cudaStream_t) of GPU `device`.
void cudnn_forward(const CudnnShape& s, const void* x, const void* w, void* y, void* stream,
                   int device, const Workspace& workspace);
void cudnn_backward_data(const CudnnShape& s, const void* w, const void* dy, void* dx, void* stream,
                         int device, const Workspace& workspace);
void cudnn_backward_filter(const CudnnShape& s, const void* x, const void* dy, void* dw,
                           void* stream, int device, const Workspace& workspace);

}  // namespace ringlet::tensor::cuda
