// The setting: one relaxed atomic flag.
#include "tensor/determinism.h"

#include <atomic>

namespace ringlet::tensor {
namespace {

std::atomic<bool>& flag() {
  static std::atomic<bool> on{false};
  return on;
}

}  // namespace

void set_deterministic(bool on) { flag().store(on, std::memory_order_relaxed); }
bool deterministic() { return flag().load(std::memory_order_relaxed); }

}  // namespace ringlet::tensor
