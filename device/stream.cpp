// Current-stream bookkeeping (thread-local, per device) and the Event / Stream wrappers.
#include "device/stream.h"

#include <map>
#include <mutex>
#include <vector>

#include "core/error.h"
#include "device/sticky_error.h"

namespace ringlet::device {
namespace {

using DeviceKey = std::pair<int, int>;  // (kind, index)
DeviceKey key(Device d) { return {static_cast<int>(d.kind), d.index}; }

std::map<DeviceKey, std::shared_ptr<Stream>>& current_streams() {
  thread_local std::map<DeviceKey, std::shared_ptr<Stream>> streams;
  return streams;
}

// Every live stream per device, for synchronize(device).
struct StreamRegistry {
  std::mutex mutex;
  std::map<DeviceKey, std::map<StreamHandle, std::weak_ptr<void>>> live;
};
StreamRegistry& registry() {
  static auto* r = new StreamRegistry;  // never destroyed: streams may outlive statics
  return *r;
}

void require_runtime(Device device, const char* what) {
  RINGLET_CHECK(!device.is_cpu(), DeviceError, what, ": the host (cpu) has no streams");
}

}  // namespace

void Stream::synchronize() const {
  runtime(device_).synchronize(handle_);
  raise_sticky_error(device_);
}

Stream compute_stream(Device device) {
  require_runtime(device, "compute_stream");
  return Stream(device, runtime(device).compute_stream());
}

Stream current_stream(Device device) {
  auto& streams = current_streams();
  const auto it = streams.find(key(device));
  if (it != streams.end() && it->second) return *it->second;
  return compute_stream(device);
}

Stream new_stream(Device device) {
  require_runtime(device, "new_stream");
  Runtime& rt = runtime(device);
  StreamHandle handle = rt.create_stream();
  std::shared_ptr<void> owner(handle, [&rt, device](void* h) {
    {
      std::lock_guard lock(registry().mutex);
      registry().live[key(device)].erase(h);
    }
    rt.destroy_stream(h);
  });
  {
    std::lock_guard lock(registry().mutex);
    registry().live[key(device)][handle] = owner;
  }
  return Stream(device, handle, std::move(owner));
}

void synchronize(Device device) {
  if (device.is_cpu()) return;
  Runtime& rt = runtime(device);
  // Owners taken under the lock keep each stream alive while it is synchronized.
  std::vector<std::shared_ptr<void>> streams;
  {
    std::lock_guard lock(registry().mutex);
    for (const auto& [handle, weak] : registry().live[key(device)]) {
      if (auto owner = weak.lock()) streams.push_back(std::move(owner));
    }
  }
  rt.synchronize(rt.compute_stream());
  for (const auto& owner : streams) rt.synchronize(owner.get());
  raise_sticky_error(device);
}

StreamGuard::StreamGuard(const Stream& stream) : device_(stream.device()) {
  auto& slot = current_streams()[key(device_)];
  previous_ = slot;
  slot = std::make_shared<Stream>(stream);
}

StreamGuard::~StreamGuard() { current_streams()[key(device_)] = previous_; }

Event::Event(Device device) : device_(device) {
  require_runtime(device, "Event");
  Runtime& rt = runtime(device);
  handle_ = std::shared_ptr<void>(rt.create_event(), [&rt](void* e) { rt.destroy_event(e); });
}

void Event::record(const Stream& stream) {
  RINGLET_CHECK(stream.device() == device_, DeviceError, "Event of ", device_,
                " recorded on a stream of ", stream.device());
  runtime(device_).record(handle_.get(), stream.handle());
}

void Event::wait(const Stream& stream) const {
  RINGLET_CHECK(stream.device() == device_, DeviceError, "Event of ", device_,
                " waited on by a stream of ", stream.device(),
                " (cross-device waits go through the host)");
  runtime(device_).wait(stream.handle(), handle_.get());
}

bool Event::query() const { return runtime(device_).query(handle_.get()); }
void Event::synchronize() const {
  runtime(device_).synchronize_event(handle_.get());
  raise_sticky_error(device_);
}

Event record_event(const Stream& stream) {
  Event event(stream.device());
  event.record(stream);
  return event;
}

}  // namespace ringlet::device
