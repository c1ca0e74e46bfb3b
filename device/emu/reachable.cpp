#include "device/emu/reachable.h"

#include <cstdint>
#include <map>
#include <mutex>

#include "core/error.h"

namespace ringlet::device::emu {
namespace {

struct Ranges {
  std::mutex mutex;
  std::map<std::uintptr_t, std::size_t> bytes_at;  // start -> length
};

Ranges& ranges() {
  static Ranges* const all = new Ranges;  // never destroyed: runtimes outlive static teardown
  return *all;
}

std::uintptr_t address(const void* ptr) { return reinterpret_cast<std::uintptr_t>(ptr); }

}  // namespace

void add_reachable(const void* ptr, std::size_t bytes) {
  Ranges& r = ranges();
  std::lock_guard lock(r.mutex);
  r.bytes_at[address(ptr)] = bytes;
}

void remove_reachable(const void* ptr) {
  Ranges& r = ranges();
  std::lock_guard lock(r.mutex);
  r.bytes_at.erase(address(ptr));
}

void check_reachable(core::Device device, const void* ptr, std::size_t bytes, const char* what) {
  if (bytes == 0) return;
  const std::uintptr_t first = address(ptr);
  Ranges& r = ranges();
  {
    std::lock_guard lock(r.mutex);
    auto it = r.bytes_at.upper_bound(first);
    if (it != r.bytes_at.begin()) {
      --it;
      if (first - it->first <= it->second && bytes <= it->second - (first - it->first)) return;
    }
  }
  RINGLET_THROW(DeviceError, device, ": ", what, " at ", ptr, " (", bytes,
                " bytes) is neither device memory nor pinned host memory: on a GPU the kernel "
                "would stop with an illegal memory access");
}

}  // namespace ringlet::device::emu
