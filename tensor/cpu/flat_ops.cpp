// Tensors through the flat loops of the level in use (tensor/cpu/flat_ops.h).
#include "tensor/cpu/flat_ops.h"

#include <initializer_list>

#include "core/threads.h"
#include "tensor/cpu/flat_loops.h"

namespace ringlet::tensor::cpu {
namespace {

// As elementwise's generic kernels: enough elements per task to amortize handing it out.
constexpr std::int64_t kParallelGrain = 1 << 15;

// The loops' dtype row: 0 for f32, 1 for f64, -1 for a dtype without loops.
int row_of(core::DType dtype) {
  return dtype == core::DType::f32 ? 0 : dtype == core::DType::f64 ? 1 : -1;
}

bool flat_with(const Tensor& out, std::initializer_list<const Tensor*> in) {
  if (!out.device().is_cpu() || !out.is_contiguous()) return false;
  for (const Tensor* t : in) {
    if (!t->device().is_cpu() || t->shape() != out.shape() || !t->is_contiguous()) return false;
  }
  return true;
}

// Element i of t's data.
void* element(const Tensor& t, std::int64_t i) {
  return static_cast<char*>(t.raw_data()) +
         i * static_cast<std::int64_t>(core::dtype_size(t.dtype()));
}

template <class Loop>
void in_parallel(const Tensor& out, Loop&& loop) {
  core::parallel_for(out.numel(), kParallelGrain,
                     [&](std::int64_t begin, std::int64_t end) { loop(begin, end - begin); });
}

}  // namespace

bool flat_binary(kernels::BinaryOp op, const Tensor& out, const Tensor& a, const Tensor& b) {
  const int row = row_of(out.dtype());
  if (row < 0 || a.dtype() != out.dtype() || b.dtype() != out.dtype() || !flat_with(out, {&a, &b}))
    return false;
  const FlatLoops& loops = flat_loops();
  const auto index = static_cast<std::size_t>(op);
  FlatLoops::Map2 fn = nullptr;
  if (index < kFlatBinaryOps) {
    fn = loops.arithmetic[row][index];
  } else if (op == kernels::BinaryOp::maximum) {
    fn = loops.select[row][0];
  } else if (op == kernels::BinaryOp::minimum) {
    fn = loops.select[row][1];
  }
  if (fn == nullptr) return false;
  in_parallel(out, [&](std::int64_t at, std::int64_t n) {
    fn(element(out, at), element(a, at), element(b, at), n);
  });
  return true;
}

bool flat_relu(const Tensor& out, const Tensor& x) {
  const int row = row_of(out.dtype());
  if (row < 0 || x.dtype() != out.dtype() || !flat_with(out, {&x})) return false;
  const FlatLoops::Map1 fn = flat_loops().relu[row];
  in_parallel(out,
              [&](std::int64_t at, std::int64_t n) { fn(element(out, at), element(x, at), n); });
  return true;
}

bool flat_relu_grad(const Tensor& out, const Tensor& g, const Tensor& x) {
  const int row = row_of(out.dtype());
  if (row < 0 || g.dtype() != out.dtype() || x.dtype() != out.dtype() || !flat_with(out, {&g, &x}))
    return false;
  const FlatLoops::Map2 fn = flat_loops().relu_grad[row];
  in_parallel(out, [&](std::int64_t at, std::int64_t n) {
    fn(element(out, at), element(g, at), element(x, at), n);
  });
  return true;
}

bool flat_cast(const Tensor& out, const Tensor& x) {
  using core::DType;
  const FlatLoops& loops = flat_loops();
  FlatLoops::Map1 fn = nullptr;
  if (x.dtype() == DType::f32 && out.dtype() == DType::f16) fn = loops.f32_to_f16;
  if (x.dtype() == DType::f16 && out.dtype() == DType::f32) fn = loops.f16_to_f32;
  if (x.dtype() == DType::f32 && out.dtype() == DType::bf16) fn = loops.f32_to_bf16;
  if (x.dtype() == DType::bf16 && out.dtype() == DType::f32) fn = loops.bf16_to_f32;
  if (fn == nullptr || !flat_with(out, {&x})) return false;
  in_parallel(out,
              [&](std::int64_t at, std::int64_t n) { fn(element(out, at), element(x, at), n); });
  return true;
}

}  // namespace ringlet::tensor::cpu
