// An explicit, seeded random generator (no global RNG state) that draws what PyTorch's CPU
// generator draws: Generator(s) gives the numbers torch.manual_seed(s) gives, so a model
// built here with seed s starts from the weights PyTorch would build with that seed, and a
// shuffle follows torch.randperm. The engine is the 32-bit Mersenne Twister seeded with the low
// 32 bits of s (PyTorch's mt19937 is the standard one); the distributions are PyTorch's
// transformations written out here (std's distributions differ between standard libraries):
//   random()         one 32-bit draw
//   random64()       two draws, the first as the high word
//   uniform()        [0, 1) from the low 53 bits of random64() (torch's double path)
//   uniform_f32()    [0, 1) from the low 24 bits of random() (torch's float path)
//   integer(lo, hi)  lo + random() % (hi - lo), random64() when the range needs 33+ bits
//   normal()         Box-Muller on two uniform()s, the sine kept for the next call
// Tensor-level sampling that follows torch's kernels (float arithmetic for f32, randn's
// 16-wide Box-Muller fill) is in tensor/ops/creation.cpp.
#pragma once

#include <cstdint>
#include <random>
#include <string>

namespace ringlet::tensor {

class Generator {
 public:
  explicit Generator(std::uint64_t seed = 0) : engine_(static_cast<std::uint32_t>(seed)) {}
  std::uint32_t random() { return static_cast<std::uint32_t>(engine_()); }
  std::uint64_t random64() {
    const std::uint64_t high = random();
    return high << 32 | random();
  }
  double uniform() {
    return static_cast<double>(random64() & ((std::uint64_t{1} << 53) - 1)) * 0x1.0p-53;
  }
  float uniform_f32() { return static_cast<float>(random() & ((1u << 24) - 1)) * 0x1.0p-24f; }
  double normal();                                            // N(0, 1)
  std::int64_t integer(std::int64_t low, std::int64_t high);  // [low, high)
  // State for checkpoints: the engine's textual state.
  std::string state() const;
  void set_state(const std::string& state);

 private:
  std::mt19937 engine_;
  bool has_spare_ = false;
  double spare_ = 0.0;
};

}  // namespace ringlet::tensor
