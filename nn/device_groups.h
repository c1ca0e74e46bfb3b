// An optimizer step's device tensors grouped by device and dtype, so that each group is updated
// by one multi-tensor launch (tensor/kernels/device_kernels.h: PyTorch's foreach optimizers)
// instead of a kernel per parameter. Tensors made for the step (contiguous gradients) are kept
// alive until the launches are queued; the stream's order does the rest.
#pragma once

#include <utility>
#include <vector>

#include "core/device.h"
#include "core/dtype.h"
#include "tensor/tensor.h"

namespace ringlet::nn {

template <class Entry>
class DeviceGroups {
 public:
  void add(core::Device device, core::DType dtype, Entry entry, tensor::Tensor keep = {}) {
    Group* group = nullptr;
    for (Group& g : groups_) {
      if (g.device == device && g.dtype == dtype) group = &g;
    }
    if (group == nullptr) group = &groups_.emplace_back(Group{device, dtype, {}});
    group->entries.push_back(entry);
    if (keep.defined()) keep_.push_back(std::move(keep));
  }
  // update(device, dtype, entries, count) once per group, in the order the groups appeared.
  template <class F>
  void run(F update) const {
    for (const Group& g : groups_) {
      update(g.device, g.dtype, g.entries.data(), static_cast<int>(g.entries.size()));
    }
  }

 private:
  struct Group {
    core::Device device;
    core::DType dtype;
    std::vector<Entry> entries;
  };
  std::vector<Group> groups_;
  std::vector<tensor::Tensor> keep_;
};

}  // namespace ringlet::nn
