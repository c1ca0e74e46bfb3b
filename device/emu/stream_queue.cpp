// The emulated stream's thread: take the next task, sleep the jitter, run it, count it.
#include "device/emu/stream_queue.h"

#include <atomic>
#include <chrono>
#include <utility>

#include "core/env.h"
#include "core/error.h"
#include "core/thread_name.h"
#include "device/runtime.h"

namespace ringlet::device::emu {
namespace {

std::atomic<int>& jitter_us() {
  static std::atomic<int> value{
      static_cast<int>(core::env_int("RINGLET_EMU_JITTER_US", 0, 0, 1000000))};
  return value;
}

}  // namespace

void StreamQueue::set_jitter(int max_us) { jitter_us().store(max_us < 0 ? 0 : max_us); }
int StreamQueue::jitter() { return jitter_us().load(); }

StreamQueue::StreamQueue(core::Device device, std::string name, std::uint64_t seed)
    : device_(device), name_(std::move(name)), rng_state_(seed), thread_([this] {
        core::name_this_thread("rl-emu-stream");
        run();
      }) {}

StreamQueue::~StreamQueue() {
  {
    std::lock_guard lock(mutex_);
    stopping_ = true;
  }
  wake_.notify_all();
  thread_.join();
}

void StreamQueue::enqueue(std::function<void()> task) {
  {
    std::lock_guard lock(mutex_);
    if (capturing_) {
      captured_.push_back(std::move(task));
      return;
    }
    tasks_.push_back(std::move(task));
    ++queued_;
  }
  wake_.notify_one();
}

void StreamQueue::begin_capture() {
  std::lock_guard lock(mutex_);
  RINGLET_CHECK(!capturing_, DeviceError, name_, ": a capture is already in progress");
  capturing_ = true;
  captured_.clear();
}

std::vector<std::function<void()>> StreamQueue::end_capture() {
  std::lock_guard lock(mutex_);
  RINGLET_CHECK(capturing_, DeviceError, name_, ": end_capture without begin_capture");
  capturing_ = false;
  return std::exchange(captured_, {});
}

bool StreamQueue::capturing() const {
  std::lock_guard lock(mutex_);
  return capturing_;
}

void StreamQueue::synchronize() {
  RINGLET_CHECK(!on_stream_thread(), DeviceError, name_,
                ": a task waits for its own stream (it would never finish)");
  std::unique_lock lock(mutex_);
  const std::uint64_t target = queued_;
  const auto timeout = device::wait_timeout();
  if (!done_.wait_for(lock, timeout, [&] { return finished_ >= target; })) {
    RINGLET_THROW(TimeoutError, name_, ": synchronize did not finish within ", timeout.count(),
                  " ms (", target - finished_, " of ", target,
                  " tasks still queued; RINGLET_DEVICE_TIMEOUT sets the deadline)");
  }
  if (failure_) {
    try {
      std::rethrow_exception(failure_);
    } catch (const std::exception& e) {
      RINGLET_THROW(DeviceError, name_, ": a queued kernel failed: ", e.what());
    }
  }
}

bool StreamQueue::wait_idle() {
  if (on_stream_thread()) return false;
  std::unique_lock lock(mutex_);
  const std::uint64_t target = queued_;
  return done_.wait_for(lock, device::wait_timeout(), [&] { return finished_ >= target; });
}

void StreamQueue::sleep_jitter() {
  const int max_us = jitter();
  if (max_us <= 0) return;
  // splitmix64: a stream's delays are reproducible for its seed.
  std::uint64_t x = rng_state_ += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  const std::uint64_t draw = (x ^ (x >> 31)) % static_cast<std::uint64_t>(max_us + 1);
  std::this_thread::sleep_for(std::chrono::microseconds(draw));
}

void StreamQueue::run() {
  std::unique_lock lock(mutex_);
  while (true) {
    wake_.wait(lock, [&] { return stopping_ || !tasks_.empty(); });
    if (tasks_.empty()) return;  // stopping, and everything has run
    std::function<void()> task = std::move(tasks_.front());
    tasks_.pop_front();
    const bool skip = failure_ != nullptr;
    lock.unlock();
    std::exception_ptr failed;
    if (!skip) {
      sleep_jitter();
      try {
        task();
      } catch (...) {
        failed = std::current_exception();
      }
    }
    task = nullptr;  // release what the task captured before counting it done
    lock.lock();
    if (failed && !failure_) failure_ = failed;
    ++finished_;
    done_.notify_all();
  }
}

}  // namespace ringlet::device::emu
