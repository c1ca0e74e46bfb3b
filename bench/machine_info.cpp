// What machine a benchmark ran on (machine_info.h).
#include "bench/machine_info.h"

#include <fstream>

#include "core/isa.h"

namespace ringlet::bench {

std::string cpu_model() {
  std::ifstream in("/proc/cpuinfo");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("model name", 0) == 0) {
      const auto colon = line.find(':');
      if (colon != std::string::npos) return line.substr(colon + 2);
    }
  }
  return "cpu";
}

std::string isa_in_use() { return std::string(core::isa_name(core::active_isa())); }

}  // namespace ringlet::bench
