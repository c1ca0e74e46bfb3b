// The sticky words live in the device's runtime (device_error_words); reading them is a plain
// load once the host has synchronized with the stream that wrote them.
#include "device/sticky_error.h"

#include <atomic>
#include <map>
#include <mutex>

#include "core/error.h"
#include "device/runtime.h"

namespace ringlet::device {
namespace {

const char* op_of(StickyCode code) {
  switch (code) {
    case StickyCode::cross_entropy_label: return "cross_entropy";
    case StickyCode::nll_loss_label: return "nll_loss";
    case StickyCode::none: break;
  }
  return "a device op";
}

struct PostedFailures {
  std::mutex mutex;
  std::map<std::pair<int, int>, std::string> by_device;
};

PostedFailures& posted() {
  static PostedFailures failures;
  return failures;
}

std::pair<int, int> key_of(core::Device device) {
  return {static_cast<int>(device.kind), device.index};
}

}  // namespace

void post_device_failure(core::Device device, const std::string& message) {
  std::lock_guard lock(posted().mutex);
  posted().by_device.emplace(key_of(device), message);
}

std::uint64_t* sticky_error_words(core::Device device) {
  return static_cast<std::uint64_t*>(runtime(device).error_words());
}

void raise_sticky_error(core::Device device) {
  if (device.is_cpu()) return;
  {
    std::lock_guard lock(posted().mutex);
    const auto it = posted().by_device.find(key_of(device));
    if (it != posted().by_device.end()) {
      const std::string message = it->second;
      posted().by_device.erase(it);
      throw core::CollectiveError(message);
    }
  }
  std::uint64_t* words = sticky_error_words(device);
  std::atomic_ref<std::uint64_t> packed(words[0]);
  const std::uint64_t word = packed.load(std::memory_order_acquire);
  if (word == 0) return;
  const std::int64_t classes = static_cast<std::int64_t>(words[1]);
  packed.store(0, std::memory_order_release);
  const auto code = static_cast<StickyCode>(word >> 56);
  const auto index = static_cast<std::int64_t>((word >> 32) & 0xffffff);
  const auto value = static_cast<std::int32_t>(word & 0xffffffff);
  const bool saturated = value == INT32_MAX || value == INT32_MIN;
  RINGLET_THROW(ValueError, op_of(code), ": target[", index, "] = ", saturated ? "about " : "",
                value, " is out of range for ", classes, " classes (expected [0, ", classes,
                "); found on ", device, " by the label check, reported at this synchronization)");
}

}  // namespace ringlet::device
