// Where a buffer lives: the host (cpu), one CUDA device, or one emulated GPU (emu). A plain
// value type. The emulated device (tensor/emu/) is a real asynchronous device run by host
// threads: its own memory, streams and events, and the same kernels as CUDA.
#pragma once

#include <ostream>
#include <string>
#include <string_view>

namespace ringlet::core {

struct Device {
  enum class Kind { cpu, cuda, emu };
  Kind kind = Kind::cpu;
  int index = 0;  // device ordinal; 0 for the host

  static Device cpu() { return {Kind::cpu, 0}; }
  static Device cuda(int index = 0) { return {Kind::cuda, index}; }
  static Device emu(int index = 0) { return {Kind::emu, index}; }
  bool is_cpu() const { return kind == Kind::cpu; }
  bool is_cuda() const { return kind == Kind::cuda; }
  bool is_emu() const { return kind == Kind::emu; }
  std::string str() const;  // "cpu", "cuda:0", "emu:1"
  friend bool operator==(const Device&, const Device&) = default;
  friend std::ostream& operator<<(std::ostream& out, const Device& d) { return out << d.str(); }
};

// "cpu", "cuda", "cuda:N", "emu", "emu:N" (as torch.device); anything else is a ValueError
// naming the text and the forms it takes.
Device parse_device(std::string_view text);

}  // namespace ringlet::core
