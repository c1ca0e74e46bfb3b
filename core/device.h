// Where a buffer lives: the host (cpu) or one CUDA device. A plain value type.
#pragma once

#include <ostream>
#include <string>

namespace ringlet::core {

struct Device {
  enum class Kind { cpu, cuda };
  Kind kind = Kind::cpu;
  int index = 0;  // CUDA ordinal; 0 for the host

  static Device cpu() { return {Kind::cpu, 0}; }
  static Device cuda(int index = 0) { return {Kind::cuda, index}; }
  bool is_cpu() const { return kind == Kind::cpu; }
  bool is_cuda() const { return kind == Kind::cuda; }
  std::string str() const { return is_cpu() ? "cpu" : "cuda:" + std::to_string(index); }
  friend bool operator==(const Device&, const Device&) = default;
  friend std::ostream& operator<<(std::ostream& out, const Device& d) { return out << d.str(); }
};

}  // namespace ringlet::core
