// Dropout's body on a device: a mask from a counter-based generator, the same for any launch.
// Written once for CUDA and the emulated GPU (tensor/kernels/nn.h).
#pragma once

#include <cstdint>

#include "tensor/kernels/hd.h"

namespace ringlet::tensor::kernels {

// Dropout on a device from a counter-based generator: element i keeps its value (scaled) when
// the uniform drawn from hash(seed, i) is below keep, so the mask depends on (seed, i) alone:
// the same on every device and for any launch geometry. The scaled mask is stored for the
// backward.
RINGLET_HD double counter_uniform(std::uint64_t seed, std::uint64_t i) {
  std::uint64_t x = seed + (i + 1) * 0x9e3779b97f4a7c15ull;  // splitmix64 of the counter
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  x ^= x >> 31;
  return static_cast<double>(x >> 11) * 0x1.0p-53;
}

template <class T>
struct DropoutFn {
  std::uint64_t seed;
  double keep;
  T scale;
  const T* in;  // contiguous
  T* out;
  T* mask;
  RINGLET_HD void operator()(std::int64_t i) const {
    const T m = counter_uniform(seed, static_cast<std::uint64_t>(i)) < keep ? scale : T(0);
    mask[i] = m;
    out[i] = in[i] * m;
  }
};

}  // namespace ringlet::tensor::kernels
