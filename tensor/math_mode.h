// Which math a GPU's GEMMs and convolutions may use:
// - allow_tf32 (process-wide, off by default, as torch.backends.cuda.matmul.allow_tf32): f32
//   GEMMs and convolutions on tensor cores in TF32 (10-bit mantissas, f32 accumulation);
// - under autocast (nn/autocast.h, a TensorCoreScope on the thread): the operands are values
//   rounded to bf16 or f16, which TF32 holds exactly, so tensor cores compute their products
//   exactly and accumulate in f32: the arithmetic of a half-precision GEMM, reading f32 memory.
// Neither applies on the deterministic path (tensor/determinism.h), nor off a GPU.
#pragma once

namespace ringlet::tensor {

void set_allow_tf32(bool on);
bool allow_tf32();

// While alive on this thread, the operands of GEMMs and convolutions are half-precision values.
class TensorCoreScope {
 public:
  explicit TensorCoreScope(bool on);
  ~TensorCoreScope();
  TensorCoreScope(const TensorCoreScope&) = delete;
  TensorCoreScope& operator=(const TensorCoreScope&) = delete;

 private:
  bool previous_;
};

// Whether a TensorCoreScope(true) is alive on this thread (ops keep it for their backward).
bool half_operands();
// Whether this thread's GEMMs and convolutions on a GPU may run on tensor cores now.
bool tensor_cores_allowed();

}  // namespace ringlet::tensor
