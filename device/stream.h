// Streams and events for the tensor layer, on any device with a runtime (cuda, emu).
// - current_stream(device): where this thread's ops on `device` queue their kernels: the
//   device's compute stream, or the stream a StreamGuard set (torch.cuda.stream(s)).
// - Stream: a value naming one stream; new_stream() makes one that lives as long as any copy
//   of its Stream does.
// - Event: record() marks the end of a stream's queue; wait() makes another stream's later work
//   wait for it without blocking the host; synchronize() blocks the host (with the device
//   deadline); query() asks.
#pragma once

#include <memory>

#include "device/runtime.h"

namespace ringlet::device {

class Stream {
 public:
  Stream(Device device, StreamHandle handle, std::shared_ptr<void> owner = nullptr)
      : device_(device), handle_(handle), owner_(std::move(owner)) {}
  Device device() const { return device_; }
  StreamHandle handle() const { return handle_; }
  void synchronize() const;
  friend bool operator==(const Stream& a, const Stream& b) { return a.handle_ == b.handle_; }

 private:
  Device device_;
  StreamHandle handle_;
  std::shared_ptr<void> owner_;  // set for streams new_stream() made
};

Stream compute_stream(Device device);
Stream current_stream(Device device);
Stream new_stream(Device device);
// Blocks until every stream of `device` this process has queued on is idle.
void synchronize(Device device);

// Makes `stream` this thread's current stream of its device until the guard ends.
class StreamGuard {
 public:
  explicit StreamGuard(const Stream& stream);
  ~StreamGuard();
  StreamGuard(const StreamGuard&) = delete;
  StreamGuard& operator=(const StreamGuard&) = delete;

 private:
  Device device_;
  std::shared_ptr<Stream> previous_;
};

class Event {
 public:
  explicit Event(Device device);
  Device device() const { return device_; }
  void record(const Stream& stream);
  void wait(const Stream& stream) const;
  bool query() const;
  void synchronize() const;

 private:
  Device device_;
  std::shared_ptr<void> handle_;
};

// The stream's work so far, as an event (a fresh Event recorded on it).
Event record_event(const Stream& stream);

}  // namespace ringlet::device
