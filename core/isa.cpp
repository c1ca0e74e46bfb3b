// CPU feature detection with CPUID and XGETBV (the OS must save the wider registers too),
// rather than __builtin_cpu_supports, whose feature names differ between GCC and clang.
#include "core/isa.h"

#include <array>

#include "core/env.h"
#include "core/error.h"

#if defined(__x86_64__)
#include <cpuid.h>
#endif

namespace ringlet::core {

namespace {

struct Feature {
  const char* name;
  bool present;
};

#if defined(__x86_64__)
struct CpuidBits {
  unsigned ecx1 = 0;  // leaf 1, ECX
  unsigned ebx7 = 0;  // leaf 7 subleaf 0, EBX
  unsigned long long xcr0 = 0;
};

CpuidBits read_cpuid() {
  CpuidBits bits;
  unsigned eax = 0, ebx = 0, edx = 0;
  if (__get_cpuid(1, &eax, &ebx, &bits.ecx1, &edx) == 0) return bits;
  unsigned ecx7 = 0;
  if (__get_cpuid_count(7, 0, &eax, &bits.ebx7, &ecx7, &edx) == 0) bits.ebx7 = 0;
  constexpr unsigned kOsxsave = 1u << 27;
  if ((bits.ecx1 & kOsxsave) != 0) {
    unsigned lo = 0, hi = 0;
    asm volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
    bits.xcr0 = (static_cast<unsigned long long>(hi) << 32) | lo;
  }
  return bits;
}

bool bit(unsigned value, int index) { return ((value >> index) & 1u) != 0; }

std::vector<Feature> features_of(Isa isa) {
  static const CpuidBits cpu = read_cpuid();
  const bool os_avx = (cpu.xcr0 & 0x6) == 0x6;                 // XMM and YMM state saved
  const bool os_avx512 = os_avx && (cpu.xcr0 & 0xe0) == 0xe0;  // opmask and ZMM state
  std::vector<Feature> needed;
  if (isa == Isa::baseline) return needed;
  needed = {{"avx", bit(cpu.ecx1, 28)},
            {"avx2", bit(cpu.ebx7, 5)},
            {"fma", bit(cpu.ecx1, 12)},
            {"f16c", bit(cpu.ecx1, 29)},
            {"os-avx-state", os_avx}};
  if (isa == Isa::avx512) {
    needed.push_back({"avx512f", bit(cpu.ebx7, 16)});
    needed.push_back({"avx512dq", bit(cpu.ebx7, 17)});
    needed.push_back({"avx512bw", bit(cpu.ebx7, 30)});
    needed.push_back({"avx512vl", bit(cpu.ebx7, 31)});
    needed.push_back({"os-avx512-state", os_avx512});
  }
  return needed;
}
#else
std::vector<Feature> features_of(Isa isa) {
  if (isa == Isa::baseline) return {};
  return {{"x86-64", false}};
}
#endif

constexpr std::array<Isa, 3> kAllIsas = {Isa::baseline, Isa::avx2, Isa::avx512};

Isa choose_isa() {
  const auto forced = env_string("RINGLET_ISA");
  if (!forced || forced->empty()) return supported_isas().back();
  const Isa isa = parse_isa(*forced, "RINGLET_ISA");
  const auto missing = missing_isa_features(isa);
  if (!missing.empty()) {
    std::string list;
    for (const auto& name : missing) list += (list.empty() ? "" : ", ") + name;
    RINGLET_THROW(ValueError, "RINGLET_ISA=", *forced, ": this CPU lacks ", list,
                  " (usable here: ", isa_name(supported_isas().back()), " and below)");
  }
  return isa;
}

}  // namespace

std::string_view isa_name(Isa isa) {
  switch (isa) {
    case Isa::baseline: return "baseline";
    case Isa::avx2: return "avx2";
    case Isa::avx512: return "avx512";
  }
  return "unknown";
}

Isa parse_isa(std::string_view text, std::string_view what) {
  for (const Isa isa : kAllIsas) {
    if (text == isa_name(isa)) return isa;
  }
  RINGLET_THROW(ValueError, what, ": unknown instruction set '", text,
                "' (choices: baseline, avx2, avx512)");
}

std::vector<std::string> missing_isa_features(Isa isa) {
  std::vector<std::string> missing;
  for (const Feature& feature : features_of(isa)) {
    if (!feature.present) missing.emplace_back(feature.name);
  }
  return missing;
}

bool isa_supported(Isa isa) { return missing_isa_features(isa).empty(); }

std::vector<Isa> supported_isas() {
  std::vector<Isa> usable;
  for (const Isa isa : kAllIsas) {
    if (isa_supported(isa)) usable.push_back(isa);
  }
  return usable;
}

Isa active_isa() {
  static const Isa isa = choose_isa();
  return isa;
}

void refuse_isa(Isa isa, std::string_view what) {
  std::string missing;
  for (const auto& feature : missing_isa_features(isa)) {
    missing += (missing.empty() ? " (it lacks " : ", ") + feature;
  }
  RINGLET_THROW(ValueError, what, ": this CPU cannot run ", isa_name(isa),
                missing.empty() ? "" : missing + ")");
}

}  // namespace ringlet::core
