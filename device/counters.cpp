// The counts: relaxed atomics per device, in a fixed table (cuda and emu, 16 of each).
#include "device/counters.h"

#include <array>
#include <atomic>

namespace ringlet::device {
namespace {

constexpr int kMaxPerKind = 16;

struct Counters {
  std::atomic<std::uint64_t> stream_ops{0}, host_syncs{0}, driver_allocs{0};
};

Counters* counters_of(core::Device device) {
  static std::array<Counters, 2 * kMaxPerKind> table;
  if (device.is_cpu() || device.index < 0 || device.index >= kMaxPerKind) return nullptr;
  return &table[static_cast<std::size_t>((device.is_cuda() ? 0 : kMaxPerKind) + device.index)];
}

}  // namespace

DeviceCounts device_counts(core::Device device) {
  const Counters* c = counters_of(device);
  if (c == nullptr) return {};
  return {c->stream_ops.load(std::memory_order_relaxed),
          c->host_syncs.load(std::memory_order_relaxed),
          c->driver_allocs.load(std::memory_order_relaxed)};
}

void count_stream_ops(core::Device device, std::uint64_t n) {
  if (Counters* c = counters_of(device)) c->stream_ops.fetch_add(n, std::memory_order_relaxed);
}

void count_host_sync(core::Device device) {
  if (Counters* c = counters_of(device)) c->host_syncs.fetch_add(1, std::memory_order_relaxed);
}

void count_driver_alloc(core::Device device) {
  if (Counters* c = counters_of(device)) c->driver_allocs.fetch_add(1, std::memory_order_relaxed);
}

}  // namespace ringlet::device
