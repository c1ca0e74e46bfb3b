// Autocast's per-thread precision and the rounding it applies.
#include "nn/autocast.h"

#include "core/error.h"

namespace ringlet::nn {
namespace {

thread_local core::DType active = core::DType::f32;

}  // namespace

Autocast::Autocast(core::DType precision) : previous_(active) {
  RINGLET_CHECK(precision == core::DType::bf16 || precision == core::DType::f16 ||
                    precision == core::DType::f32,
                ValueError, "Autocast: precision must be bf16, f16 or f32, got ", precision);
  active = precision;
}

Autocast::~Autocast() { active = previous_; }

core::DType autocast_precision() { return active; }

tensor::Tensor autocast(const tensor::Tensor& t) {
  if (active == core::DType::f32 || !t.defined()) return t;
  RINGLET_CHECK(t.dtype() == core::DType::f32, DTypeError, "autocast: expected an f32 tensor, got ",
                t.dtype(), " (shape ", tensor::shape_str(t.shape()), ")");
  return t.to(active).to(core::DType::f32);
}

}  // namespace ringlet::nn
