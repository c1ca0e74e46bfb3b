// gather and index_select on CPU, with backward rules (scatter-add and index-add into zeros:
// an index may repeat, so gradients accumulate). Kernels walk the output through for_each_offset
// with the input's stride along `dim` set to 0, then add index * stride for the picked element.
// Every index is range-checked; an error names the value and its position.
#include "tensor/ops/index.h"

#include <array>
#include <vector>

#include "tensor/autograd.h"
#include "tensor/cpu/dispatch.h"
#include "tensor/cpu/loops.h"
#include "tensor/ops/creation.h"
#include "tensor/ops/device_check.h"

namespace ringlet::tensor {
namespace {

using Offsets3 = std::array<std::int64_t, 3>;

void check_index_tensor(const char* op, const Tensor& input, const Tensor& index) {
  RINGLET_CHECK(index.dtype() == DType::i64, DTypeError, op, ": index must be i64, got dtype ",
                index.dtype(), " (index shape ", shape_str(index.shape()), ")");
  RINGLET_CHECK(index.device() == input.device(), DeviceError, op, ": input on ", input.device(),
                " but index on ", index.device());
}

// t's strides with the entry for `dim` zeroed (a 0-d tensor has none).
Shape strides_without(const Tensor& t, std::int64_t dim) {
  Shape strides = t.strides();
  if (dim < t.dim()) strides[dim] = 0;
  return strides;
}

std::int64_t extent(const Tensor& t, std::int64_t dim) { return t.dim() ? t.size(dim) : 1; }
std::int64_t step(const Tensor& t, std::int64_t dim) { return t.dim() ? t.stride(dim) : 0; }

// The multi-index of row-major position `linear` in `shape`, for error messages.
Shape unravel(std::int64_t linear, const Shape& shape) {
  Shape position(shape.size());
  for (std::size_t d = shape.size(); d-- > 0;) {
    position[d] = linear % shape[d];
    linear /= shape[d];
  }
  return position;
}

}  // namespace

Tensor gather(const Tensor& input, std::int64_t dim, const Tensor& index) {
  const std::int64_t d = wrap_dim(dim, input.dim(), "gather");
  check_index_tensor("gather", input, index);
  RINGLET_CHECK(index.dim() == input.dim(), ShapeError, "gather: index of shape ",
                shape_str(index.shape()), " must have the rank of the input of shape ",
                shape_str(input.shape()));
  for (std::int64_t i = 0; i < input.dim(); ++i) {
    RINGLET_CHECK(i == d || index.size(i) <= input.size(i), ShapeError, "gather: index of shape ",
                  shape_str(index.shape()), " is larger than the input of shape ",
                  shape_str(input.shape()), " in dim ", i, " (only dim ", d, " may differ)");
  }
  require_cpu(input, "gather");
  Tensor out = Tensor::empty(index.shape(), input.dtype());
  const Shape in_strides = strides_without(input, d);
  const std::int64_t size = extent(input, d), in_step = step(input, d);
  cpu::dispatch_numeric(input.dtype(), "gather", [&]<class T>() {
    const T* in = input.data<T>();
    const std::int64_t* idx = index.data<std::int64_t>();
    T* dst = out.data<T>();
    cpu::for_each_offset<3>(
        index.shape(), {&index.strides(), &in_strides, &out.strides()}, [&](const Offsets3& off) {
          const std::int64_t i = idx[off[0]];
          RINGLET_CHECK(i >= 0 && i < size, ValueError, "gather: index ", i, " at position ",
                        shape_str(unravel(off[2], index.shape())), " is out of range for dim ", d,
                        " of size ", size, " (input shape ", shape_str(input.shape()), ")");
          dst[off[2]] = in[off[1] + i * in_step];
        });
  });
  return record(
      "GatherBackward", out, {input},
      [idx = index.detach(), in_shape = input.shape(), d](const Tensor& g,
                                                          const std::vector<bool>&) {
        Tensor grad = zeros(in_shape, g.dtype());
        const Shape grad_strides = strides_without(grad, d);
        const std::int64_t grad_step = step(grad, d);
        cpu::dispatch_floating(g.dtype(), "gather backward", [&]<class T>() {
          const T* src = g.data<T>();
          const std::int64_t* at = idx.data<std::int64_t>();
          T* dst = grad.data<T>();
          cpu::for_each_offset<3>(
              idx.shape(), {&idx.strides(), &grad_strides, &g.strides()},
              [&](const Offsets3& off) { dst[off[1] + at[off[0]] * grad_step] += src[off[2]]; });
        });
        return std::vector<Tensor>{grad};
      });
}

Tensor index_select(const Tensor& input, std::int64_t dim, const Tensor& index) {
  RINGLET_CHECK(input.dim() >= 1, ShapeError, "index_select: input must have at least one dim");
  const std::int64_t d = wrap_dim(dim, input.dim(), "index_select");
  check_index_tensor("index_select", input, index);
  RINGLET_CHECK(index.dim() <= 1, ShapeError, "index_select: index must be 1-D, got shape ",
                shape_str(index.shape()));
  require_cpu(input, "index_select");
  const std::vector<std::int64_t> picks = index.to_vector<std::int64_t>();
  for (std::size_t i = 0; i < picks.size(); ++i) {
    RINGLET_CHECK(picks[i] >= 0 && picks[i] < input.size(d), ValueError, "index_select: index[", i,
                  "] = ", picks[i], " is out of range for dim ", d, " of size ", input.size(d),
                  " (input shape ", shape_str(input.shape()), ")");
  }
  Shape out_shape = input.shape();
  out_shape[d] = static_cast<std::int64_t>(picks.size());
  Tensor out = Tensor::empty(out_shape, input.dtype());
  // The third operand's offset is the position along dim, which selects the index entry.
  Shape position(input.dim(), 0);
  position[d] = 1;
  const Shape in_strides = strides_without(input, d);
  cpu::dispatch_numeric(input.dtype(), "index_select", [&]<class T>() {
    const T* in = input.data<T>();
    T* dst = out.data<T>();
    const std::int64_t in_step = input.stride(d);
    cpu::for_each_offset<3>(
        out_shape, {&out.strides(), &in_strides, &position},
        [&](const Offsets3& off) { dst[off[0]] = in[off[1] + picks[off[2]] * in_step]; });
  });
  return record(
      "IndexSelectBackward", out, {input},
      [picks, position, in_shape = input.shape(), d](const Tensor& g, const std::vector<bool>&) {
        Tensor grad = zeros(in_shape, g.dtype());
        const Shape grad_strides = strides_without(grad, d);
        cpu::dispatch_floating(g.dtype(), "index_select backward", [&]<class T>() {
          const T* src = g.data<T>();
          T* dst = grad.data<T>();
          const std::int64_t grad_step = grad.stride(d);
          cpu::for_each_offset<3>(
              g.shape(), {&g.strides(), &grad_strides, &position},
              [&](const Offsets3& off) { dst[off[1] + picks[off[2]] * grad_step] += src[off[0]]; });
        });
        return std::vector<Tensor>{grad};
      });
}

}  // namespace ringlet::tensor
