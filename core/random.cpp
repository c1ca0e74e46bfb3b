// random_u64: one std::random_device per call, so no state is shared between threads.
#include "core/random.h"

#include <random>

namespace ringlet::core {

std::uint64_t random_u64() {
  std::random_device device;
  const std::uint64_t high = device();
  return (high << 32) ^ device();
}

}  // namespace ringlet::core
