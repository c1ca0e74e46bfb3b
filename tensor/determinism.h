// Which arithmetic device ops take, process-wide (as torch.use_deterministic_algorithms):
// - deterministic: every device op computes exactly what the CPU computes, the CPU's
//   decomposition of each op included (a convolution's GEMM per image where the CPU runs one,
//   its input gradient image by image), so a run on the emulated device matches a CPU run bit
//   for bit; the emulated device's tests rely on it.
// - fast (the default): fewer, larger kernels (a convolution's forward and both backward
//   passes as one batched GEMM each, over the whole batch); the same bits run to run on one
//   device, but sums may round differently from the CPU's.
// The CPU itself always runs its own kernels. Set it before the ops it should govern run.
#pragma once

namespace ringlet::tensor {

void set_deterministic(bool on);
bool deterministic();

// Sets it for a scope, restoring what was set before.
class DeterministicGuard {
 public:
  explicit DeterministicGuard(bool on) : previous_(deterministic()) { set_deterministic(on); }
  ~DeterministicGuard() { set_deterministic(previous_); }
  DeterministicGuard(const DeterministicGuard&) = delete;
  DeterministicGuard& operator=(const DeterministicGuard&) = delete;

 private:
  bool previous_;
};

}  // namespace ringlet::tensor
