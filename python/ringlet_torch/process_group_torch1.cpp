// The torch 1.x face of the backend: RingletFace over c10d::ProcessGroup (face.h), and the module
// that torch calls to create one (ringlet_torch/__init__.py registers it as "ringlet"). torch
// 2.x derives c10d::Backend instead: process_group_torch2.cpp.
#include <pybind11/chrono.h>
#include <torch/extension.h>

#include <torch/csrc/distributed/c10d/ProcessGroup.hpp>

#include "face.h"

namespace ringlet::torch_backend {
namespace {

c10::intrusive_ptr<c10d::ProcessGroup> create(const c10::intrusive_ptr<c10d::Store>& store,
                                              int rank, int size,
                                              std::chrono::duration<float> timeout) {
  const auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(timeout);
  return c10::make_intrusive<RingletFace<c10d::ProcessGroup>>(store, rank, size, ms);
}

}  // namespace
}  // namespace ringlet::torch_backend

PYBIND11_MODULE(_C, m) {
  m.doc() = "ringlet's collectives as a torch.distributed process group (torch 1.x)";
  m.def("create_process_group", &ringlet::torch_backend::create, pybind11::arg("store"),
        pybind11::arg("rank"), pybind11::arg("size"), pybind11::arg("timeout"),
        pybind11::call_guard<pybind11::gil_scoped_release>(),  // the rendezvous may wait
        "The process group torch.distributed creates for backend 'ringlet'");
  m.attr("torch_api") = "ProcessGroup";
}
