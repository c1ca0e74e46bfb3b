// The torch 2.x face of the backend: RingletFace over c10d::Backend (face.h), and the module
// that torch calls to create one (ringlet_torch/__init__.py registers it as "ringlet"). torch
// 1.x derives c10d::ProcessGroup instead: process_group_torch1.cpp.
#include <pybind11/chrono.h>
#include <torch/extension.h>

#include <torch/csrc/distributed/c10d/Backend.hpp>

#include "face.h"

namespace ringlet::torch_backend {
namespace {

c10::intrusive_ptr<c10d::Backend> create(const c10::intrusive_ptr<c10d::Store>& store, int rank,
                                         int size, std::chrono::duration<float> timeout) {
  const auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(timeout);
  return c10::make_intrusive<RingletFace<c10d::Backend>>(store, rank, size, ms);
}

}  // namespace
}  // namespace ringlet::torch_backend

PYBIND11_MODULE(_C, m) {
  m.doc() = "ringlet's collectives as a torch.distributed backend (torch 2.x)";
  m.def("create_process_group", &ringlet::torch_backend::create, pybind11::arg("store"),
        pybind11::arg("rank"), pybind11::arg("size"), pybind11::arg("timeout"),
        pybind11::call_guard<pybind11::gil_scoped_release>(),  // the rendezvous may wait
        "The backend torch.distributed creates for backend 'ringlet'");
  m.attr("torch_api") = "Backend";
}
