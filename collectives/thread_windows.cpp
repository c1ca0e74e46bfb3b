#include "collectives/thread_windows.h"

#include <cstdint>
#include <map>
#include <mutex>

namespace ringlet::collectives {
namespace {

struct Registry {
  std::mutex mutex;
  std::map<std::uintptr_t, std::weak_ptr<std::byte>> windows;  // by address
};

Registry& registry() {
  static Registry* const all = new Registry;  // never destroyed: spaces may close after exit
  return *all;
}

std::uintptr_t key_of(const void* address) { return reinterpret_cast<std::uintptr_t>(address); }

}  // namespace

SharedWindow allocate_thread_window(device::Runtime& runtime, std::size_t bytes) {
  auto* memory = static_cast<std::byte*>(runtime.malloc(bytes));
  if (memory == nullptr) return nullptr;
  SharedWindow window(memory, [&runtime](std::byte* p) {
    {
      Registry& r = registry();
      std::lock_guard lock(r.mutex);
      r.windows.erase(key_of(p));
    }
    runtime.free(p);
  });
  Registry& r = registry();
  std::lock_guard lock(r.mutex);
  r.windows[key_of(memory)] = window;
  return window;
}

SharedWindow hold_thread_window(const void* address) {
  Registry& r = registry();
  std::lock_guard lock(r.mutex);
  const auto it = r.windows.find(key_of(address));
  return it == r.windows.end() ? nullptr : it->second.lock();
}

}  // namespace ringlet::collectives
