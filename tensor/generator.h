// An explicit, seeded random generator (no global RNG state). Same seed, same sequence, on
// every machine: the engine is std::mt19937_64 and the distributions are written out here
// (std's distributions differ between standard libraries).
#pragma once

#include <cstdint>
#include <random>

namespace ringlet::tensor {

class Generator {
 public:
  explicit Generator(std::uint64_t seed = 0) : engine_(seed) {}
  std::uint64_t next_u64() { return engine_(); }
  double uniform() { return static_cast<double>(engine_() >> 11) * 0x1.0p-53; }  // [0, 1)
  double normal();                                                               // N(0, 1)
  std::int64_t integer(std::int64_t low, std::int64_t high);                     // [low, high)
  // State for checkpoints: the engine's textual state.
  std::string state() const;
  void set_state(const std::string& state);

 private:
  std::mt19937_64 engine_;
  bool has_spare_ = false;
  double spare_ = 0.0;
};

}  // namespace ringlet::tensor
