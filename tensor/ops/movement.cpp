// View ops (rewrite shape/strides/offset over shared storage), copies, cat and sum_to,
// with their backward rules: reshape back, inverse permutation, zero-pad a slice, sum over
// broadcast axes.
#include "tensor/ops/movement.h"

#include <algorithm>
#include <numeric>
#include <optional>

#include "tensor/autograd.h"
#include "tensor/cpu/copy.h"
#include "tensor/cpu/dispatch.h"
#include "tensor/cpu/loops.h"
#include "tensor/ops/creation.h"
#include "tensor/ops/device_dispatch.h"
#include "tensor/ops/elementwise.h"

namespace ringlet::tensor {
namespace {

Tensor alias(const Tensor& t, Shape shape, Shape strides, std::int64_t offset) {
  return Tensor::make_view(t.storage(), std::move(shape), std::move(strides), offset, t.dtype());
}

Shape infer_shape(const Shape& shape, std::int64_t numel, const Shape& from, const char* op) {
  Shape out = shape;
  std::int64_t known = 1;
  std::optional<std::size_t> infer;
  for (std::size_t i = 0; i < out.size(); ++i) {
    if (out[i] == -1) {
      RINGLET_CHECK(!infer, ShapeError, op, ": only one dim can be -1 in ", shape_str(shape));
      infer = i;
    } else {
      RINGLET_CHECK(out[i] >= 0, ShapeError, op, ": invalid size in ", shape_str(shape));
      known *= out[i];
    }
  }
  if (infer) {
    RINGLET_CHECK(known != 0 && numel % known == 0, ShapeError, op, ": shape ", shape_str(shape),
                  " is invalid for input of shape ", shape_str(from));
    out[*infer] = numel / known;
  }
  RINGLET_CHECK(shape_numel(out) == numel, ShapeError, op, ": shape ", shape_str(shape),
                " is invalid for input of shape ", shape_str(from), " (", numel, " elements)");
  return out;
}

// Strides that let `new_shape` view memory laid out as (old_shape, old_strides), if any
// (the chunk-matching rule of PyTorch's view).
std::optional<Shape> view_strides(const Shape& old_shape, const Shape& old_strides,
                                  const Shape& new_shape) {
  if (old_shape.empty() || shape_numel(old_shape) == 0) return contiguous_strides(new_shape);
  Shape strides(new_shape.size());
  std::int64_t view_d = static_cast<std::int64_t>(new_shape.size()) - 1;
  std::int64_t chunk_base = old_strides.back();
  std::int64_t tensor_numel = 1, view_numel = 1;
  for (std::int64_t d = static_cast<std::int64_t>(old_shape.size()) - 1; d >= 0; --d) {
    tensor_numel *= old_shape[d];
    if (d == 0 || (old_shape[d - 1] != 1 && old_strides[d - 1] != tensor_numel * chunk_base)) {
      while (view_d >= 0 && (view_numel < tensor_numel || new_shape[view_d] == 1)) {
        strides[view_d] = view_numel * chunk_base;
        view_numel *= new_shape[view_d];
        --view_d;
      }
      if (view_numel != tensor_numel) return std::nullopt;
      if (d > 0) {
        chunk_base = old_strides[d - 1];
        tensor_numel = 1;
        view_numel = 1;
      }
    }
  }
  if (view_d != -1) return std::nullopt;
  return strides;
}

}  // namespace

Shape broadcast_shapes(const Shape& a, const Shape& b, const char* op) {
  const std::size_t n = std::max(a.size(), b.size());
  Shape out(n);
  for (std::size_t i = 0; i < n; ++i) {
    const std::int64_t da = i < n - a.size() ? 1 : a[i - (n - a.size())];
    const std::int64_t db = i < n - b.size() ? 1 : b[i - (n - b.size())];
    RINGLET_CHECK(da == db || da == 1 || db == 1, ShapeError, op, ": shapes ", shape_str(a),
                  " and ", shape_str(b), " cannot be broadcast together");
    out[i] = da == 1 ? db : da;
  }
  return out;
}

Tensor view(const Tensor& t, Shape shape) {
  const Shape target = infer_shape(shape, t.numel(), t.shape(), "view");
  const auto strides = view_strides(t.shape(), t.strides(), target);
  RINGLET_CHECK(strides.has_value(), ShapeError, "view: shape ", shape_str(target),
                " is incompatible with the strides ", shape_str(t.strides()), " of input shape ",
                shape_str(t.shape()), "; use reshape() (it copies)");
  Tensor out = alias(t, target, *strides, t.offset());
  const Shape in_shape = t.shape();
  return record("ViewBackward", out, {t}, [in_shape](const Tensor& g, const std::vector<bool>&) {
    return std::vector<Tensor>{reshape(g, in_shape)};
  });
}

Tensor reshape(const Tensor& t, Shape shape) {
  const Shape target = infer_shape(shape, t.numel(), t.shape(), "reshape");
  if (view_strides(t.shape(), t.strides(), target)) return view(t, target);
  return view(contiguous(t), target);
}

Tensor flatten(const Tensor& t, std::int64_t start_dim, std::int64_t end_dim) {
  if (t.dim() == 0) return reshape(t, {1});
  const std::int64_t s = wrap_dim(start_dim, t.dim(), "flatten");
  const std::int64_t e = wrap_dim(end_dim, t.dim(), "flatten");
  RINGLET_CHECK(s <= e, ValueError, "flatten: start_dim ", start_dim, " comes after end_dim ",
                end_dim);
  Shape shape(t.shape().begin(), t.shape().begin() + s);
  std::int64_t merged = 1;
  for (std::int64_t d = s; d <= e; ++d) merged *= t.size(d);
  shape.push_back(merged);
  shape.insert(shape.end(), t.shape().begin() + e + 1, t.shape().end());
  return reshape(t, shape);
}

Tensor permute(const Tensor& t, const Shape& dims) {
  RINGLET_CHECK(static_cast<std::int64_t>(dims.size()) == t.dim(), ShapeError,
                "permute: ", dims.size(), " dims given for a tensor of rank ", t.dim(), " (shape ",
                shape_str(t.shape()), ")");
  Shape shape(dims.size()), strides(dims.size()), inverse(dims.size());
  std::vector<bool> seen(dims.size(), false);
  for (std::size_t i = 0; i < dims.size(); ++i) {
    const std::int64_t d = wrap_dim(dims[i], t.dim(), "permute");
    RINGLET_CHECK(!seen[d], ValueError, "permute: dim ", dims[i], " repeated in ", shape_str(dims));
    seen[d] = true;
    shape[i] = t.shape()[d];
    strides[i] = t.strides()[d];
    inverse[d] = static_cast<std::int64_t>(i);
  }
  Tensor out = alias(t, shape, strides, t.offset());
  return record("PermuteBackward", out, {t}, [inverse](const Tensor& g, const std::vector<bool>&) {
    return std::vector<Tensor>{permute(g, inverse)};
  });
}

Tensor transpose(const Tensor& t, std::int64_t dim0, std::int64_t dim1) {
  if (t.dim() == 0) return t;
  Shape dims(t.dim());
  std::iota(dims.begin(), dims.end(), 0);
  std::swap(dims[wrap_dim(dim0, t.dim(), "transpose")], dims[wrap_dim(dim1, t.dim(), "transpose")]);
  return permute(t, dims);
}

Tensor slice(const Tensor& t, std::int64_t dim, std::int64_t start, std::int64_t end,
             std::int64_t step) {
  RINGLET_CHECK(t.dim() > 0, ShapeError, "slice: cannot slice a 0-d tensor");
  const std::int64_t d = wrap_dim(dim, t.dim(), "slice");
  RINGLET_CHECK(step > 0, ValueError, "slice: step must be positive, got ", step);
  const std::int64_t extent = t.size(d);
  auto clamp_index = [extent](std::int64_t i) {
    if (i < 0) i += extent;
    return std::clamp<std::int64_t>(i, 0, extent);
  };
  const std::int64_t b = clamp_index(start);
  const std::int64_t e = std::max(b, clamp_index(end));
  Shape shape = t.shape(), strides = t.strides();
  shape[d] = (e - b + step - 1) / step;
  strides[d] *= step;
  Tensor out = alias(t, shape, strides, t.offset() + b * t.strides()[d]);
  const Shape in_shape = t.shape();
  const DType dtype = t.dtype();
  return record("SliceBackward", out, {t},
                [in_shape, dtype, d, b, e, step](const Tensor& g, const std::vector<bool>&) {
                  Tensor full = zeros(in_shape, dtype);
                  Tensor window = slice(full, d, b, e, step);
                  copy_(window, g);
                  return std::vector<Tensor>{full};
                });
}

Tensor narrow(const Tensor& t, std::int64_t dim, std::int64_t start, std::int64_t length) {
  RINGLET_CHECK(t.dim() > 0, ShapeError, "narrow: cannot narrow a 0-d tensor");
  const std::int64_t d = wrap_dim(dim, t.dim(), "narrow");
  const std::int64_t s = start < 0 ? start + t.size(d) : start;
  RINGLET_CHECK(s >= 0 && length >= 0 && s + length <= t.size(d), ShapeError, "narrow: [", start,
                ", ", start, " + ", length, ") is out of range for dim ", dim, " of size ",
                t.size(d), " (shape ", shape_str(t.shape()), ")");
  return slice(t, d, s, s + length, 1);
}

Tensor select(const Tensor& t, std::int64_t dim, std::int64_t index) {
  RINGLET_CHECK(t.dim() > 0, ShapeError, "select: cannot index a 0-d tensor");
  const std::int64_t d = wrap_dim(dim, t.dim(), "select");
  const std::int64_t i = index < 0 ? index + t.size(d) : index;
  RINGLET_CHECK(i >= 0 && i < t.size(d), ShapeError, "select: index ", index,
                " is out of range for dim ", dim, " of size ", t.size(d));
  return squeeze(narrow(t, d, i, 1), d);
}

Tensor expand(const Tensor& t, const Shape& shape) {
  RINGLET_CHECK(shape.size() >= static_cast<std::size_t>(t.dim()), ShapeError, "expand: shape ",
                shape_str(shape), " has fewer dims than the input ", shape_str(t.shape()));
  const std::size_t lead = shape.size() - t.dim();
  Shape out_shape(shape.size()), strides(shape.size(), 0);
  for (std::size_t i = 0; i < shape.size(); ++i) {
    if (i < lead) {
      RINGLET_CHECK(shape[i] >= 0, ShapeError, "expand: -1 not allowed for the new leading dim ", i,
                    " in ", shape_str(shape));
      out_shape[i] = shape[i];
      continue;
    }
    const std::int64_t have = t.shape()[i - lead];
    const std::int64_t want = shape[i] == -1 ? have : shape[i];
    RINGLET_CHECK(have == want || have == 1, ShapeError, "expand: cannot expand shape ",
                  shape_str(t.shape()), " to ", shape_str(shape));
    out_shape[i] = want;
    strides[i] = have == want ? t.strides()[i - lead] : 0;
  }
  if (out_shape == t.shape()) return t;
  Tensor out = alias(t, out_shape, strides, t.offset());
  const Shape in_shape = t.shape();
  return record("ExpandBackward", out, {t}, [in_shape](const Tensor& g, const std::vector<bool>&) {
    return std::vector<Tensor>{sum_to(g, in_shape)};
  });
}

Tensor squeeze(const Tensor& t) {
  Shape shape;
  for (auto extent : t.shape()) {
    if (extent != 1) shape.push_back(extent);
  }
  return shape.size() == t.shape().size() ? t : view(t, shape);
}

Tensor squeeze(const Tensor& t, std::int64_t dim) {
  if (t.dim() == 0) return t;
  const std::int64_t d = wrap_dim(dim, t.dim(), "squeeze");
  if (t.size(d) != 1) return t;
  Shape shape = t.shape();
  shape.erase(shape.begin() + d);
  return view(t, shape);
}

Tensor unsqueeze(const Tensor& t, std::int64_t dim) {
  const std::int64_t d = wrap_dim(dim, t.dim() + 1, "unsqueeze");
  Shape shape = t.shape();
  shape.insert(shape.begin() + d, 1);
  return view(t, shape);
}

// dst = src (same shape, same device; any two dtypes), by the device's copy kernel.
static void copy_same_device(const Tensor& dst, const Tensor& src) {
  if (dst.device().is_cpu()) {
    cpu::copy(dst, src);
  } else {
    kernels_for(dst.device()).copy(kernel_view(dst), kernel_view(src), stream_for(dst.device()));
  }
}

Tensor clone(const Tensor& t) {
  Tensor out = Tensor::empty(t.shape(), t.dtype(), t.device());
  copy_same_device(out, t);
  return record("CloneBackward", out, {t},
                [](const Tensor& g, const std::vector<bool>&) { return std::vector<Tensor>{g}; });
}

Tensor contiguous(const Tensor& t) { return t.is_contiguous() ? t : clone(t); }

Tensor Tensor::to(DType target) const {
  if (target == dtype()) return *this;
  Tensor out = Tensor::empty(shape(), target, device());
  copy_same_device(out, *this);
  if (!core::is_floating(target)) return out;  // integer results carry no gradient
  const DType source = dtype();
  return record("ToDTypeBackward", out, {*this},
                [source](const Tensor& g, const std::vector<bool>&) {
                  return std::vector<Tensor>{g.to(source)};
                });
}

Tensor cat(const std::vector<Tensor>& tensors, std::int64_t dim) {
  RINGLET_CHECK(!tensors.empty(), ValueError, "cat: no tensors given");
  const Tensor& first = tensors.front();
  const std::int64_t d = wrap_dim(dim, first.dim(), "cat");
  Shape shape = first.shape();
  shape[d] = 0;
  for (const auto& t : tensors) {
    same_device({&first, &t}, "cat");
    RINGLET_CHECK(t.dim() == first.dim() && t.dtype() == first.dtype(), ShapeError,
                  "cat: tensor of shape ", shape_str(t.shape()), " (", t.dtype(),
                  ") does not match ", shape_str(first.shape()), " (", first.dtype(), ")");
    for (std::int64_t i = 0; i < t.dim(); ++i) {
      RINGLET_CHECK(i == d || t.size(i) == first.size(i), ShapeError, "cat: shapes ",
                    shape_str(first.shape()), " and ", shape_str(t.shape()), " differ outside dim ",
                    d);
    }
    shape[d] += t.size(d);
  }
  Tensor out = Tensor::empty(shape, first.dtype(), first.device());
  std::vector<std::int64_t> sizes;
  std::int64_t at = 0;
  for (const auto& t : tensors) {
    Tensor window = narrow(out, d, at, t.size(d));
    copy_same_device(window, t);
    sizes.push_back(t.size(d));
    at += t.size(d);
  }
  return record("CatBackward", out, tensors,
                [d, sizes](const Tensor& g, const std::vector<bool>& needs) {
                  std::vector<Tensor> grads;
                  std::int64_t start = 0;
                  for (std::size_t i = 0; i < sizes.size(); ++i) {
                    grads.push_back(needs[i] ? narrow(g, d, start, sizes[i]) : Tensor());
                    start += sizes[i];
                  }
                  return grads;
                });
}

// out += grad over the axes where `strides` (out's, for grad's shape) are 0.
static void sum_to_cpu(const Tensor& out, const Tensor& grad, const Shape& strides) {
  cpu::dispatch_numeric(grad.dtype(), "sum_to", [&]<class T>() {
    T* dst = out.data<T>();
    const T* src = grad.data<T>();
    cpu::for_each_offset<2>(
        grad.shape(), {&strides, &grad.strides()},
        [&](const std::array<std::int64_t, 2>& off) { dst[off[0]] += src[off[1]]; });
  });
}

Tensor sum_to(const Tensor& grad, const Shape& shape) {
  if (grad.shape() == shape) return grad;
  RINGLET_CHECK(shape.size() <= grad.shape().size(), ShapeError, "sum_to: cannot reduce ",
                shape_str(grad.shape()), " to ", shape_str(shape));
  // View the zero-filled result with stride 0 on broadcast axes, then accumulate through it.
  Tensor out = zeros(shape, grad.dtype(), grad.device());
  const std::size_t lead = grad.shape().size() - shape.size();
  Shape strides(grad.shape().size(), 0);
  for (std::size_t i = lead; i < grad.shape().size(); ++i) {
    const std::int64_t extent = shape[i - lead];
    RINGLET_CHECK(extent == grad.shape()[i] || extent == 1, ShapeError, "sum_to: cannot reduce ",
                  shape_str(grad.shape()), " to ", shape_str(shape));
    strides[i] = extent == 1 ? 0 : out.strides()[i - lead];
  }
  if (!grad.device().is_cpu()) {
    RINGLET_CHECK(core::is_floating(grad.dtype()), DTypeError, "sum_to: a ", grad.dtype(),
                  " tensor on ", grad.device(), " (gradients are floating)");
    // The sum kernel over grad's shape into a keepdim view of out (size 1 where it reduces).
    Shape keep(grad.shape().size(), 1);
    for (std::size_t i = lead; i < keep.size(); ++i) keep[i] = shape[i - lead];
    kernels_for(grad.device())
        .sum(kernel_view(out.view(keep)), kernel_view(grad), 1.0, stream_for(grad.device()));
  } else {
    sum_to_cpu(out, grad, strides);
  }
  return record("SumToBackward", out, {grad},
                [in_shape = grad.shape()](const Tensor& g, const std::vector<bool>&) {
                  return std::vector<Tensor>{contiguous(expand(g, in_shape))};
                });
}

}  // namespace ringlet::tensor
