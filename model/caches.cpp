#include "model/caches.h"

#include <unistd.h>

#include <fstream>

namespace ringlet::model {
namespace {

// /sys/devices/system/cpu/cpu0/cache/index*: a level, a size ("48K", "1024K", "32M") and the
// CPUs that share it ("0" where the first CPU has it to itself).
std::vector<CacheLevel> sysfs_levels() {
  std::vector<CacheLevel> levels;
  for (int index = 0; index < 8; ++index) {
    const std::string dir = "/sys/devices/system/cpu/cpu0/cache/index" + std::to_string(index);
    std::ifstream size_file(dir + "/size"), level_file(dir + "/level"),
        shared_file(dir + "/shared_cpu_list");
    std::size_t value = 0;
    int level = 0;
    char unit = 0;
    std::string shared;
    if (!(size_file >> value) || !(level_file >> level)) continue;
    size_file >> unit;
    shared_file >> shared;
    const std::size_t scale = unit == 'K' ? 1024 : unit == 'M' ? std::size_t{1} << 20 : 1;
    levels.push_back({level, value * scale, shared == "0"});
  }
  return levels;
}

// What the CPU reports (glibc reads cpuid): levels 1 (data) and 2 its own, 3 and 4 shared.
std::vector<CacheLevel> cpuid_levels() {
  const struct {
    int level, name;
    bool own;
  } kLevels[] = {{1, _SC_LEVEL1_DCACHE_SIZE, true},
                 {2, _SC_LEVEL2_CACHE_SIZE, true},
                 {3, _SC_LEVEL3_CACHE_SIZE, false},
                 {4, _SC_LEVEL4_CACHE_SIZE, false}};
  std::vector<CacheLevel> levels;
  for (const auto& [level, name, own] : kLevels) {
    const long bytes = sysconf(name);
    if (bytes > 0) levels.push_back({level, static_cast<std::size_t>(bytes), own});
  }
  return levels;
}

}  // namespace

Caches caches_of(const std::vector<CacheLevel>& levels, const std::string& source) {
  Caches caches;
  int deepest = 0;
  for (const CacheLevel& cache : levels) {
    if (cache.bytes == 0) continue;
    if (cache.level > deepest || (cache.level == deepest && cache.bytes > caches.last_level)) {
      deepest = cache.level;
      caches.last_level = cache.bytes;
    }
    if (cache.own && cache.bytes > caches.own) caches.own = cache.bytes;
  }
  if (caches.last_level > 0) caches.source = source;
  return caches;
}

Caches read_caches() {
  Caches caches = caches_of(sysfs_levels(), "sysfs");
  if (caches.last_level == 0) caches = caches_of(cpuid_levels(), "cpuid");
  return caches;
}

}  // namespace ringlet::model
