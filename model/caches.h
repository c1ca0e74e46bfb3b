// read_caches(): the first CPU's caches as the machine names them, for `ringlet model fit`: the
// last level's size and the largest cache the CPU has to itself (its own level 2). sysfs first
// (on a VM its share of a large part, not the whole chip's that the CPU itself may report); where
// sysfs names none (some VMs expose no cache directories), what the CPU reports (glibc's
// sysconf, from cpuid), its level 2 taken as its own, as on x86 server parts.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

namespace ringlet::model {

struct Caches {
  std::size_t last_level = 0;  // the deepest level's size (0: unknown)
  std::size_t own = 0;         // the largest one the first CPU has to itself (0: unknown)
  std::string source;          // "sysfs", "cpuid", or empty where neither names any
};

struct CacheLevel {
  int level = 0;
  std::size_t bytes = 0;
  bool own = false;  // the first CPU's alone
};

// The deepest level's size (the largest of that level) and the largest own one, from `source`.
Caches caches_of(const std::vector<CacheLevel>& levels, const std::string& source);

// sysfs's caches of the first CPU (index0 ...), else the CPU's own report, else none.
Caches read_caches();

}  // namespace ringlet::model
