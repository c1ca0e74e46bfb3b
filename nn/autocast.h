// Autocast: mixed precision for the layers that do the arithmetic, as torch.autocast. While a
// guard is alive on this thread, Linear and Conv2d round their input, weight and bias to the
// guard's precision (bf16 or f16, nearest even; beyond f16's range: inf) and round their output
// too; they accumulate in f32, and the parameters stay f32 (the master weights the optimizer
// updates). Each rounding is recorded like a cast (`t.to(p).to(f32)`), so backward rounds the
// gradients at the same points, as PyTorch's half-precision gradients are. Every other op runs
// in f32 on the rounded values (as if the model upcast them, e.g. for the loss).
//
//   {
//     nn::Autocast amp(DType::bf16);
//     logits = model.forward(x);
//   }
//   loss = criterion(logits, y);  // f16: scale it (nn::GradScaler) before backward
//
// On the CPU this gives the numerics of mixed precision (what overflows or underflows, what
// loss scaling must catch), not its speed: the GEMMs still run in f32 on rounded values.
#pragma once

#include "core/dtype.h"
#include "tensor/tensor.h"

namespace ringlet::nn {

class Autocast {
 public:
  // precision: bf16 or f16 (ValueError otherwise); f32 turns autocast off inside the scope.
  explicit Autocast(core::DType precision);
  ~Autocast();
  Autocast(const Autocast&) = delete;
  Autocast& operator=(const Autocast&) = delete;

 private:
  core::DType previous_;
};

// The innermost guard's precision on this thread; f32 when none is alive.
core::DType autocast_precision();

// `t` rounded to the autocast precision (kept f32, gradient rounded too); `t` itself when
// autocast is off or `t` is undefined.
tensor::Tensor autocast(const tensor::Tensor& t);

}  // namespace ringlet::nn
