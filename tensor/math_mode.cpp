// The TF32 flag (process-wide) and the autocast scope (per thread).
#include "tensor/math_mode.h"

#include <atomic>

#include "tensor/determinism.h"

namespace ringlet::tensor {
namespace {

std::atomic<bool>& tf32() {
  static std::atomic<bool> on{false};
  return on;
}
thread_local bool t_half_operands = false;

}  // namespace

void set_allow_tf32(bool on) { tf32().store(on, std::memory_order_relaxed); }
bool allow_tf32() { return tf32().load(std::memory_order_relaxed); }

TensorCoreScope::TensorCoreScope(bool on) : previous_(t_half_operands) { t_half_operands = on; }
TensorCoreScope::~TensorCoreScope() { t_half_operands = previous_; }

bool half_operands() { return t_half_operands; }

bool tensor_cores_allowed() { return !deterministic() && (allow_tf32() || t_half_operands); }

}  // namespace ringlet::tensor
