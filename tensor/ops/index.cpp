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
#include "tensor/ops/device_dispatch.h"
#include "tensor/ops/movement.h"
#include "tensor/ops/reduce.h"

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

// gather on a device: the kernel reads through the input's strides; out-of-range indices are
// counted there and named from a host copy (one read of the count per call).
Tensor gather_device(const Tensor& input, std::int64_t d, const Tensor& index) {
  const Tensor idx = index.contiguous();
  Tensor out = Tensor::empty(idx.shape(), input.dtype(), input.device());
  Tensor bad = Tensor::empty({idx.numel()}, DType::u8, input.device());
  kernels::View in_view = kernel_view(input);
  kernels_for(input.device())
      .gather(input.dtype(), in_view, static_cast<int>(d), kernel_view(idx), out.raw_data(),
              static_cast<std::uint8_t*>(bad.raw_data()), stream_for(input.device()));
  if (idx.numel() > 0 && sum(bad).item() > 0) {
    const auto values = idx.to_vector<std::int64_t>();
    const auto flags = bad.to_vector<std::uint8_t>();
    for (std::size_t i = 0; i < flags.size(); ++i) {
      RINGLET_CHECK(!flags[i], ValueError, "gather: index ", values[i], " at position ",
                    shape_str(unravel(static_cast<std::int64_t>(i), idx.shape())),
                    " is out of range for dim ", d, " of size ", input.size(d), " (input shape ",
                    shape_str(input.shape()), ")");
    }
  }
  return record(
      "GatherBackward", out, {input},
      [idx = idx.detach(), in_shape = input.shape(), d](const Tensor& g, const std::vector<bool>&) {
        const Tensor gc = g.contiguous();
        Tensor grad = Tensor::empty(in_shape, gc.dtype(), gc.device());
        kernels_for(gc.device())
            .gather_backward(gc.dtype(), kernel_view(grad), static_cast<int>(d), kernel_view(idx),
                             gc.raw_data(), stream_for(gc.device()));
        return std::vector<Tensor>{grad};
      });
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
  if (!input.device().is_cpu()) return gather_device(input, d, index);
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
  if (!input.device().is_cpu()) {
    // A gather with the index broadcast over the other dims (its checks name the bad index).
    Shape along(static_cast<std::size_t>(input.dim()), 1);
    along[d] = index.numel();
    Shape out_shape = input.shape();
    out_shape[d] = index.numel();
    return gather(input, d, expand(index.reshape(along), out_shape).contiguous());
  }
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

Tensor flip(const Tensor& input, std::int64_t dim) {
  RINGLET_CHECK(input.dim() >= 1, ShapeError, "flip: input must have at least one dim");
  const std::int64_t d = wrap_dim(dim, input.dim(), "flip");
  const std::int64_t n = input.size(d);
  const Tensor reversed = arange(static_cast<double>(n - 1), -1.0, -1.0, DType::i64);
  return index_select(input, d, reversed.to(input.device()));
}

}  // namespace ringlet::tensor
