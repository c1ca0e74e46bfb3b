// cuDNN's legacy convolution API through function pointers taken from the library at run time;
// per shape one plan (descriptors, and each pass's algorithm and workspace), searched with
// cudnnFind*AlgorithmEx the first time the shape runs outside a capture; one handle per device.
// The three passes share one search-then-run (search_then_run), each pass naming its calls.
#include <cuda_runtime.h>
#include <cudnn.h>
#include <dlfcn.h>

#include <cstdlib>
#include <cstring>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "core/cuda_plugin.h"
#include "core/error.h"
#include "tensor/cuda/cudnn_conv.h"

namespace ringlet::tensor::cuda {
namespace {

// clang-format off: one function a line
#define RINGLET_CUDNN_FUNCTIONS(X)                 \
  X(cudnnGetErrorString)                           \
  X(cudnnCreate)                                   \
  X(cudnnSetStream)                                \
  X(cudnnCreateTensorDescriptor)                   \
  X(cudnnSetTensor4dDescriptor)                    \
  X(cudnnCreateFilterDescriptor)                   \
  X(cudnnSetFilter4dDescriptor)                    \
  X(cudnnCreateConvolutionDescriptor)              \
  X(cudnnSetConvolution2dDescriptor)               \
  X(cudnnSetConvolutionMathType)                   \
  X(cudnnFindConvolutionForwardAlgorithmEx)        \
  X(cudnnFindConvolutionBackwardDataAlgorithmEx)   \
  X(cudnnFindConvolutionBackwardFilterAlgorithmEx) \
  X(cudnnGetConvolutionForwardAlgorithm_v7)        \
  X(cudnnGetConvolutionBackwardDataAlgorithm_v7)   \
  X(cudnnGetConvolutionBackwardFilterAlgorithm_v7) \
  X(cudnnConvolutionForward)                       \
  X(cudnnConvolutionBackwardData)                  \
  X(cudnnConvolutionBackwardFilter)
// clang-format on

// The library's functions, or why they could not be had.
struct Api {
#define RINGLET_CUDNN_POINTER(name) decltype(&::name) name = nullptr;
  RINGLET_CUDNN_FUNCTIONS(RINGLET_CUDNN_POINTER)
#undef RINGLET_CUDNN_POINTER
  std::string missing;  // "" when every function was found
};

Api load() {
  Api api;
  const char* flag = std::getenv("RINGLET_CUDNN");
  if (flag != nullptr && std::strcmp(flag, "0") == 0) {
    api.missing = "RINGLET_CUDNN=0";
    return api;
  }
  void* lib = nullptr;
  for (const char* name : {"libcudnn.so.9", "libcudnn.so"}) {
    if ((lib = ::dlopen(name, RTLD_NOW | RTLD_LOCAL)) != nullptr) break;
  }
  if (lib == nullptr) {
    const char* error = ::dlerror();
    api.missing = std::string("libcudnn.so.9 could not be loaded: ") + (error ? error : "?");
    return api;
  }
#define RINGLET_CUDNN_LOOKUP(name)                                     \
  api.name = reinterpret_cast<decltype(&::name)>(::dlsym(lib, #name)); \
  if (api.name == nullptr && api.missing.empty()) api.missing = "libcudnn has no " #name;
  RINGLET_CUDNN_FUNCTIONS(RINGLET_CUDNN_LOOKUP)
#undef RINGLET_CUDNN_LOOKUP
  return api;
}

const Api& api() {
  static const Api loaded = load();
  return loaded;
}

void check(cudnnStatus_t status, const std::string& what) {
  if (status != CUDNN_STATUS_SUCCESS) {
    RINGLET_THROW(DeviceError, "cuDNN ", what, " failed: ", api().cudnnGetErrorString(status));
  }
}

bool capturing(cudaStream_t stream) {
  cudaStreamCaptureStatus status = cudaStreamCaptureStatusNone;
  return cudaStreamIsCapturing(stream, &status) == cudaSuccess &&
         status != cudaStreamCaptureStatusNone;
}

// One pass's choice.
struct Choice {
  int algo = 0;
  std::size_t workspace = 0;
  bool searched = false;  // by cudnnFind*Ex (else cuDNN's heuristic, to be searched later)
};

// A shape's descriptors and choices (one convolution descriptor per pass: each carries the
// math type its algorithm wants).
struct Plan {
  cudnnTensorDescriptor_t x = nullptr, y = nullptr;
  cudnnFilterDescriptor_t w = nullptr;
  cudnnConvolutionDescriptor_t conv[3] = {nullptr, nullptr, nullptr};
  Choice choice[3];
};
enum Pass { kForward = 0, kData = 1, kFilter = 2 };

constexpr std::size_t kSearchWorkspace = std::size_t{64} << 20;
constexpr int kAlgos = 8;

std::mutex& mutex() {  // the plans and the handles
  static std::mutex m;
  return m;
}

// One handle per device, made on first use (with mutex() held).
cudnnHandle_t handle(int device) {
  static std::vector<cudnnHandle_t> handles;
  RINGLET_CHECK(device >= 0, DeviceError, "cuDNN: no device ", device);
  if (handles.size() <= static_cast<std::size_t>(device)) handles.resize(device + 1, nullptr);
  if (handles[device] == nullptr) {
    cudaSetDevice(device);
    check(api().cudnnCreate(&handles[device]), "cudnnCreate");
  }
  return handles[device];
}

Plan& plan_for(const CudnnShape& s) {  // with mutex() held
  static std::vector<std::pair<CudnnShape, std::unique_ptr<Plan>>> plans;
  for (auto& [shape, plan] : plans) {
    if (shape == s) return *plan;
  }
  auto p = std::make_unique<Plan>();
  const Api& a = api();
  check(a.cudnnCreateTensorDescriptor(&p->x), "tensor descriptor");
  check(a.cudnnSetTensor4dDescriptor(p->x, CUDNN_TENSOR_NCHW, CUDNN_DATA_FLOAT, s.n, s.c, s.h, s.w),
        "tensor descriptor");
  check(a.cudnnCreateTensorDescriptor(&p->y), "tensor descriptor");
  check(a.cudnnSetTensor4dDescriptor(p->y, CUDNN_TENSOR_NCHW, CUDNN_DATA_FLOAT, s.n, s.o, s.out_h,
                                     s.out_w),
        "tensor descriptor");
  check(a.cudnnCreateFilterDescriptor(&p->w), "filter descriptor");
  check(
      a.cudnnSetFilter4dDescriptor(p->w, CUDNN_DATA_FLOAT, CUDNN_TENSOR_NCHW, s.o, s.c, s.kh, s.kw),
      "filter descriptor");
  const cudnnMathType_t math = s.tensor_cores ? CUDNN_TENSOR_OP_MATH : CUDNN_FMA_MATH;
  for (cudnnConvolutionDescriptor_t& conv : p->conv) {
    check(a.cudnnCreateConvolutionDescriptor(&conv), "convolution descriptor");
    check(a.cudnnSetConvolution2dDescriptor(conv, s.pad_h, s.pad_w, s.stride_h, s.stride_w,
                                            s.dilation_h, s.dilation_w, CUDNN_CROSS_CORRELATION,
                                            CUDNN_DATA_FLOAT),
          "convolution descriptor");
    check(a.cudnnSetConvolutionMathType(conv, math), "math type");
  }
  plans.emplace_back(s, std::move(p));
  return *plans.back().second;
}

// The first successful result of a search or heuristic (its algorithm, workspace, math type).
template <class Perf>
Choice first_success(const Perf* perf, int count, cudnnConvolutionDescriptor_t conv, bool searched,
                     const char* what) {
  for (int i = 0; i < count; ++i) {
    if (perf[i].status != CUDNN_STATUS_SUCCESS) continue;
    check(api().cudnnSetConvolutionMathType(conv, perf[i].mathType), "math type");
    return Choice{static_cast<int>(perf[i].algo), perf[i].memory, searched};
  }
  RINGLET_THROW(DeviceError, "cuDNN found no algorithm for the ", what, " of this convolution");
}

// What differs between the three passes: their operands, the search (outside a capture),
// cuDNN's heuristic (inside one, where a search cannot run) and the call that runs the pass.
struct ForwardPass {
  using Perf = cudnnConvolutionFwdAlgoPerf_t;
  static constexpr Pass kPass = kForward;
  static constexpr const char* kName = "forward";
  const void *x, *w;
  void* y;
  cudnnStatus_t heuristic(cudnnHandle_t h, const Plan& p, int* found, Perf* perf) const {
    return api().cudnnGetConvolutionForwardAlgorithm_v7(h, p.x, p.w, p.conv[kPass], p.y, kAlgos,
                                                        found, perf);
  }
  cudnnStatus_t search(cudnnHandle_t h, const Plan& p, int* found, Perf* perf, void* space,
                       std::size_t bytes) const {
    return api().cudnnFindConvolutionForwardAlgorithmEx(h, p.x, x, p.w, w, p.conv[kPass], p.y, y,
                                                        kAlgos, found, perf, space, bytes);
  }
  cudnnStatus_t run(cudnnHandle_t h, const Plan& p, const Choice& c, void* space) const {
    const float one = 1, zero = 0;
    return api().cudnnConvolutionForward(h, &one, p.x, x, p.w, w, p.conv[kPass],
                                         static_cast<cudnnConvolutionFwdAlgo_t>(c.algo), space,
                                         c.workspace, &zero, p.y, y);
  }
};

struct DataGradientPass {
  using Perf = cudnnConvolutionBwdDataAlgoPerf_t;
  static constexpr Pass kPass = kData;
  static constexpr const char* kName = "data gradient";
  const void *w, *dy;
  void* dx;
  cudnnStatus_t heuristic(cudnnHandle_t h, const Plan& p, int* found, Perf* perf) const {
    return api().cudnnGetConvolutionBackwardDataAlgorithm_v7(h, p.w, p.y, p.conv[kPass], p.x,
                                                             kAlgos, found, perf);
  }
  cudnnStatus_t search(cudnnHandle_t h, const Plan& p, int* found, Perf* perf, void* space,
                       std::size_t bytes) const {
    return api().cudnnFindConvolutionBackwardDataAlgorithmEx(h, p.w, w, p.y, dy, p.conv[kPass], p.x,
                                                             dx, kAlgos, found, perf, space, bytes);
  }
  cudnnStatus_t run(cudnnHandle_t h, const Plan& p, const Choice& c, void* space) const {
    const float one = 1, zero = 0;
    return api().cudnnConvolutionBackwardData(h, &one, p.w, w, p.y, dy, p.conv[kPass],
                                              static_cast<cudnnConvolutionBwdDataAlgo_t>(c.algo),
                                              space, c.workspace, &zero, p.x, dx);
  }
};

struct FilterGradientPass {
  using Perf = cudnnConvolutionBwdFilterAlgoPerf_t;
  static constexpr Pass kPass = kFilter;
  static constexpr const char* kName = "filter gradient";
  const void *x, *dy;
  void* dw;
  cudnnStatus_t heuristic(cudnnHandle_t h, const Plan& p, int* found, Perf* perf) const {
    return api().cudnnGetConvolutionBackwardFilterAlgorithm_v7(h, p.x, p.y, p.conv[kPass], p.w,
                                                               kAlgos, found, perf);
  }
  cudnnStatus_t search(cudnnHandle_t h, const Plan& p, int* found, Perf* perf, void* space,
                       std::size_t bytes) const {
    return api().cudnnFindConvolutionBackwardFilterAlgorithmEx(
        h, p.x, x, p.y, dy, p.conv[kPass], p.w, dw, kAlgos, found, perf, space, bytes);
  }
  cudnnStatus_t run(cudnnHandle_t h, const Plan& p, const Choice& c, void* space) const {
    const float one = 1, zero = 0;
    return api().cudnnConvolutionBackwardFilter(
        h, &one, p.x, x, p.y, dy, p.conv[kPass],
        static_cast<cudnnConvolutionBwdFilterAlgo_t>(c.algo), space, c.workspace, &zero, p.w, dw);
  }
};

// Every pass: the shape's plan, its algorithm (searched the first time outside a capture; inside
// one cuDNN's heuristic stands in until a later run can search), then the pass on `stream`.
template <class PassT>
void search_then_run(const CudnnShape& s, const PassT& pass, void* stream, int device,
                     const Workspace& workspace) {
  std::lock_guard lock(mutex());
  cudnnHandle_t h = handle(device);
  const auto st = static_cast<cudaStream_t>(stream);
  check(api().cudnnSetStream(h, st), "cudnnSetStream");
  Plan& p = plan_for(s);
  Choice& c = p.choice[PassT::kPass];
  if (!c.searched) {
    typename PassT::Perf perf[kAlgos];
    int found = 0;
    const bool searching = !capturing(st);
    if (searching) {
      check(pass.search(h, p, &found, perf, workspace(kSearchWorkspace), kSearchWorkspace),
            std::string(PassT::kName) + " search");
    } else {
      check(pass.heuristic(h, p, &found, perf), std::string(PassT::kName) + " heuristic");
    }
    c = first_success(perf, found, p.conv[PassT::kPass], searching, PassT::kName);
  }
  check(pass.run(h, p, c, workspace(c.workspace)), PassT::kName);
}

}  // namespace

const std::string& cudnn_unavailable() { return api().missing; }

void cudnn_forward(const CudnnShape& s, const void* x, const void* w, void* y, void* stream,
                   int device, const Workspace& workspace) {
  search_then_run(s, ForwardPass{x, w, y}, stream, device, workspace);
}

void cudnn_backward_data(const CudnnShape& s, const void* w, const void* dy, void* dx, void* stream,
                         int device, const Workspace& workspace) {
  search_then_run(s, DataGradientPass{w, dy, dx}, stream, device, workspace);
}

void cudnn_backward_filter(const CudnnShape& s, const void* x, const void* dy, void* dw,
                           void* stream, int device, const Workspace& workspace) {
  search_then_run(s, FilterGradientPass{x, dy, dw}, stream, device, workspace);
}

}  // namespace ringlet::tensor::cuda

// The plugin's entry points (core/cuda_plugin.h); tensor/cuda/plugin_calls.cpp calls them.
namespace cuda = ringlet::tensor::cuda;
RINGLET_CUDA_PLUGIN_EXPORT const std::string* ringlet_cuda_cudnn_unavailable() {
  return &cuda::cudnn_unavailable();
}
RINGLET_CUDA_PLUGIN_EXPORT void ringlet_cuda_cudnn_forward(const cuda::CudnnShape& s, const void* x,
                                                           const void* w, void* y, void* stream,
                                                           int device,
                                                           const cuda::Workspace& workspace) {
  cuda::cudnn_forward(s, x, w, y, stream, device, workspace);
}
RINGLET_CUDA_PLUGIN_EXPORT void ringlet_cuda_cudnn_backward_data(const cuda::CudnnShape& s,
                                                                 const void* w, const void* dy,
                                                                 void* dx, void* stream, int device,
                                                                 const cuda::Workspace& workspace) {
  cuda::cudnn_backward_data(s, w, dy, dx, stream, device, workspace);
}
RINGLET_CUDA_PLUGIN_EXPORT void ringlet_cuda_cudnn_backward_filter(
    const cuda::CudnnShape& s, const void* x, const void* dy, void* dw, void* stream, int device,
    const cuda::Workspace& workspace) {
  cuda::cudnn_backward_filter(s, x, dy, dw, stream, device, workspace);
}
