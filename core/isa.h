// Which vector instruction set the CPU kernels use, chosen once at start-up. One portable
// binary carries each hot loop compiled for several levels (as OpenBLAS's DYNAMIC_ARCH and
// glibc's ifuncs do) and picks the best this CPU and its OS support:
//   baseline  plain x86-64 (SSE2), or the only level on other architectures;
//   avx2      AVX2 + FMA + F16C (x86-64-v3's vector units);
//   avx512    AVX-512 F/BW/DQ/VL on top of avx2 (x86-64-v4's).
// RINGLET_ISA=baseline|avx2|avx512 forces a level; forcing one this CPU lacks is a ValueError
// that names what is missing.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace ringlet::core {

enum class Isa : std::uint8_t { baseline, avx2, avx512 };

std::string_view isa_name(Isa isa);
// "baseline", "avx2" or "avx512"; anything else is a ValueError naming `what` and the choices.
Isa parse_isa(std::string_view text, std::string_view what);
// The CPU features `isa` needs that this CPU (or its OS) does not provide; empty when usable.
std::vector<std::string> missing_isa_features(Isa isa);
bool isa_supported(Isa isa);
// Every level this machine can run, baseline first.
std::vector<Isa> supported_isas();
// The level in use: RINGLET_ISA when set (checked), else the best supported. Read once.
Isa active_isa();

// Throws the ValueError for asking `what` (a family of kernels) for a level this CPU cannot
// run: "<what>: this CPU cannot run avx512 (it lacks avx512bw, ...)".
[[noreturn]] void refuse_isa(Isa isa, std::string_view what);

// The table of `isa` among one table of kernels per level (the host reduction's, tensor's flat
// loops'). `usable` is indexed by level and holds the levels this CPU runs, nullptr for the
// others (and for avx2 and avx512 outside x86-64); any other level is refused as above.
template <class Table>
const Table& table_for_isa(const std::array<const Table*, 3>& usable, Isa isa,
                           std::string_view what) {
  const auto level = static_cast<std::size_t>(isa);
  if (level < usable.size() && usable[level] != nullptr) return *usable[level];
  refuse_isa(isa, what);
}

}  // namespace ringlet::core
