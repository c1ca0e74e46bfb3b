// One stream of the emulated GPU: a queue of tasks (kernels, copies, event records and waits)
// run in order by the stream's own host thread, concurrently with the host and with every
// other stream, as a CUDA stream runs on its device. Nothing here is synchronous with the
// caller: enqueue() returns at once, so a missing event wait or a host read before a
// synchronize reads what is there at that moment.
// Jitter (set_jitter, RINGLET_EMU_JITTER_US) sleeps a random 0..max microseconds before each
// task, drawn per stream: it reorders work across streams the way a loaded GPU would, which
// is what the stream tests need to expose a missing wait.
// A task that throws marks the stream failed (CUDA's sticky error): later tasks are skipped
// and synchronize() rethrows the first failure, naming the stream.
// Capture (CUDA's stream capture): between begin_capture() and end_capture(), enqueue() keeps
// tasks instead of running them; end_capture() hands them over, to be run again and again
// (tasks must not consume what they capture).
#pragma once

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <exception>
#include <functional>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "core/device.h"

namespace ringlet::device::emu {

class StreamQueue {
 public:
  StreamQueue(core::Device device, std::string name, std::uint64_t seed);
  ~StreamQueue();  // runs what is queued, then stops the thread
  StreamQueue(const StreamQueue&) = delete;
  StreamQueue& operator=(const StreamQueue&) = delete;

  const std::string& name() const { return name_; }
  core::Device device() const { return device_; }
  void enqueue(std::function<void()> task);
  void begin_capture();  // DeviceError when already capturing
  std::vector<std::function<void()>> end_capture();
  bool capturing() const;
  // Blocks until every task queued before the call has run (TimeoutError at the device
  // deadline); rethrows the stream's failure.
  void synchronize();
  // Waits (up to the device deadline) until everything queued so far has run, without
  // reporting the stream's failure: for freeing memory the queue may still use. False on
  // timeout.
  bool wait_idle();
  // True while this thread is the stream's own (a task that tries to wait on its stream).
  bool on_stream_thread() const { return std::this_thread::get_id() == thread_.get_id(); }

  static void set_jitter(int max_us);  // 0 turns it off
  static int jitter();

 private:
  void run();
  void sleep_jitter();

  core::Device device_;
  std::string name_;
  std::uint64_t rng_state_;
  mutable std::mutex mutex_;
  std::condition_variable wake_, done_;
  std::deque<std::function<void()>> tasks_;
  std::uint64_t queued_ = 0, finished_ = 0;
  std::exception_ptr failure_;
  bool stopping_ = false;
  bool capturing_ = false;
  std::vector<std::function<void()>> captured_;
  std::thread thread_;
};

}  // namespace ringlet::device::emu
