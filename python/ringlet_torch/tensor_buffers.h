// How torch tensors become ringlet buffers: checked (CPU, one tensor where c10d wants one),
// contiguous (the tensor itself when it already is), in an element type ringlet reduces, or as
// bytes for ops that reduce nothing; and how results are written back into the caller's tensors
// once an op is done.
#pragma once

#include <ATen/ATen.h>

#include <functional>
#include <torch/csrc/distributed/c10d/Types.hpp>
#include <vector>

#include "collectives/types.h"
#include "staging_pool.h"

namespace ringlet::torch_backend {

// The one tensor of a c10d tensor list (c10d passes lists; one tensor per process here).
at::Tensor& single(std::vector<at::Tensor>& tensors, const char* op);
// A CPU tensor's contiguous form (itself when contiguous); refuses other devices, naming op.
at::Tensor host_dense(const at::Tensor& tensor, const char* op);
std::size_t nbytes(const at::Tensor& tensor);

// A tensor as ringlet reduces it: `buffer` (the dense tensor itself, or an int32 copy of an
// int8/int16 one), its element type and the ringlet reduce op (bool: sum/max/bor are max,
// prod/min/band min).
struct Reducible {
  at::Tensor buffer;
  collectives::DType dtype;
  collectives::ReduceOp op;
  std::size_t count() const { return static_cast<std::size_t>(buffer.numel()); }
  void* data() const { return buffer.data_ptr(); }
};
Reducible reducible(const at::Tensor& dense, const c10d::ReduceOp& op, const char* name);

// What runs when an op is done: `user` gets `buffer`'s values when they are not the same tensor
// (a contiguous copy, a widened one), and both stay alive until then.
std::function<void()> write_back(at::Tensor user, at::Tensor buffer);

// Tensors laid end to end as bytes (in `pool`'s memory), checked to share `like`'s element
// type; and back.
at::Tensor concat_bytes(const std::vector<at::Tensor>& tensors, const at::Tensor& like,
                        const char* op, StagingPool& pool);
void split_bytes(const at::Tensor& bytes, std::vector<at::Tensor>& tensors);

}  // namespace ringlet::torch_backend
