// Copy kernel: a flat loop (memcpy when dtypes match) for contiguous operands, strided
// iteration otherwise; conversions through cpu::convert (f16/bf16 via float), except the
// contiguous f32 <-> f16/bf16 ones, which run the instruction-set level's loop (flat_ops.h),
// split over core::parallel_for like the elementwise ops.
#include "tensor/cpu/copy.h"

#include <cstring>

#include "tensor/cpu/dispatch.h"
#include "tensor/cpu/flat_ops.h"
#include "tensor/cpu/loops.h"

namespace ringlet::tensor::cpu {

void copy(const Tensor& dst, const Tensor& src) {
  RINGLET_CHECK(dst.shape() == src.shape(), ShapeError, "copy: destination shape ",
                shape_str(dst.shape()), " differs from source shape ", shape_str(src.shape()));
  if (dst.numel() == 0) return;
  if (dst.dtype() == src.dtype() && dst.is_contiguous() && src.is_contiguous()) {
    std::memmove(dst.raw_data(), src.raw_data(), dst.nbytes());
    return;
  }
  if (flat_cast(dst, src)) return;  // f32 <-> f16/bf16 in the level's vector loop
  dispatch_all(dst.dtype(), [&]<class D>() {
    dispatch_all(src.dtype(), [&]<class S>() {
      D* out = static_cast<D*>(dst.raw_data());
      const S* in = static_cast<const S*>(src.raw_data());
      if (dst.is_contiguous() && src.is_contiguous()) {
        const std::int64_t n = dst.numel();
        for (std::int64_t i = 0; i < n; ++i) out[i] = convert<D>(in[i]);
        return;
      }
      for_each_offset<2>(
          dst.shape(), {&dst.strides(), &src.strides()},
          [&](const std::array<std::int64_t, 2>& off) { out[off[0]] = convert<D>(in[off[1]]); });
    });
  });
}

}  // namespace ringlet::tensor::cpu
