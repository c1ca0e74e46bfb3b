// What machine a benchmark ran on, for its header and JSON lines: the CPU model, the host name
// and the instruction-set level of the CPU kernels in use (core/isa.h).
#pragma once

#include <string>

namespace ringlet::bench {

std::string cpu_model();   // /proc/cpuinfo's "model name", or "cpu"
std::string isa_in_use();  // "baseline", "avx2" or "avx512"

}  // namespace ringlet::bench
