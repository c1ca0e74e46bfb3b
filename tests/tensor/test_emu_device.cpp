// The emulated GPU as a device: names, memory of its own, transfers, and CUDA's stream
// semantics. The ordering tests hold a stream back at a gate (a queued task that waits for the
// test to open it), so "the consumer ran before the producer" happens every time, not by luck:
// without the event wait, the copy on the other stream, or record_stream, the result is wrong;
// with it, right. A jittered stress run then checks that correct code stays correct when every
// task is delayed at random.
#include <doctest/doctest.h>

#include <cmath>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <stdexcept>
#include <string>

#include "device/emu/stream_queue.h"
#include "device/stream.h"
#include "tensor/device/allocator.h"
#include "tensor/device/transfer.h"
#include "tensor/ops.h"

using namespace ringlet;
using namespace ringlet::tensor;
using namespace ringlet::core;

namespace {

const Device kEmu = Device::emu(0);

// Queues a task on `stream` that blocks it until open() is called (or the gate is destroyed).
// The task shares the gate's state, so the gate may go before the task has run.
class Gate {
 public:
  explicit Gate(const device::Stream& stream) : state_(std::make_shared<State>()) {
    device::runtime(stream.device()).host_func(stream.handle(), [state = state_] {
      std::unique_lock lock(state->mutex);
      state->opened.wait(lock, [&] { return state->open; });
    });
  }
  ~Gate() { open(); }
  void open() {
    {
      std::lock_guard lock(state_->mutex);
      state_->open = true;
    }
    state_->opened.notify_all();
  }

 private:
  struct State {
    std::mutex mutex;
    std::condition_variable opened;
    bool open = false;
  };
  std::shared_ptr<State> state_;
};

std::vector<float> values(const Tensor& t) { return t.cpu().to_vector<float>(); }

}  // namespace

TEST_CASE("devices are named, parsed and checked, naming the devices that exist") {
  CHECK(core::parse_device("emu:1") == Device::emu(1));
  CHECK(core::parse_device("cuda") == Device::cuda(0));
  CHECK(core::parse_device("cpu") == Device::cpu());
  CHECK_THROWS_AS(core::parse_device("gpu"), ValueError);
  CHECK_THROWS_AS(core::parse_device("emu:-1"), ValueError);
  CHECK_THROWS_AS(core::parse_device("cpu:1"), ValueError);
  CHECK(device::device_count(Device::Kind::emu) >= 1);
  try {
    (void)zeros({2}, DType::f32, Device::emu(99));
    FAIL("emu:99 was accepted");
  } catch (const DeviceError& e) {
    CHECK(std::string(e.what()).find("emu:0") != std::string::npos);
  }
}

TEST_CASE("device memory is the device's: tensors round-trip, host kernels refuse it") {
  Generator gen(3);
  const Tensor host = randn({5, 7}, gen);
  const Tensor dev = host.to(kEmu);
  CHECK(dev.device() == kEmu);
  CHECK(values(dev) == host.to_vector<float>());
  CHECK_THROWS_AS((void)dev.data<float>(), DeviceError);
  // Fresh device memory is NaN-filled, so a kernel reading what nobody wrote shows it.
  const Tensor fresh = empty({1 << 16}, DType::f32, kEmu);
  const auto v = values(fresh);
  CHECK(std::isnan(v.front()));
  CHECK(std::isnan(v.back()));
}

TEST_CASE(
    "a stream that waits for an event sees the producer's result; without the wait it "
    "does not") {
  const device::Stream producer = device::new_stream(kEmu), consumer = device::new_stream(kEmu);
  for (const bool with_wait : {true, false}) {
    CAPTURE(with_wait);
    Tensor x = zeros({1000}, DType::f32, kEmu);
    device::synchronize(kEmu);
    Tensor y;
    device::Event ready(kEmu);
    {
      Gate gate(producer);
      {
        device::StreamGuard on(producer);
        fill_(x, 3.0);
        ready.record(producer);
      }
      {
        device::StreamGuard on(consumer);
        if (with_wait) ready.wait(consumer);
        tensor::record_stream(x, consumer);
        y = mul(x, 2.0);
      }
      if (!with_wait) consumer.synchronize();  // the consumer is done before the producer ran
      gate.open();
    }
    device::synchronize(kEmu);
    const float expected = with_wait ? 6.0f : 0.0f;  // without the wait it doubled the zeros
    CHECK(values(y) == std::vector<float>(1000, expected));
  }
}

TEST_CASE("a non-blocking copy to the host must be synchronized before it is read") {
  Tensor x = full({4096}, 5.0, DType::f32, kEmu);
  device::synchronize(kEmu);
  {
    // A pinned block of this size holding -1s, back in the pinned cache for the copy to reuse,
    // so what the early read sees is known (not whatever the memory held).
    Tensor seed = full({4096}, -1.0, DType::f32).pin_memory();
  }
  const device::Stream compute = device::current_stream(kEmu);
  Tensor host;
  {
    Gate gate(compute);
    host = x.to(Device::cpu(), /*non_blocking=*/true);
    CHECK(host.is_pinned());
    // Read before synchronizing: the copy has not run, so the values are not there yet.
    CHECK(host.to_vector<float>() == std::vector<float>(4096, -1.0f));
    gate.open();
  }
  compute.synchronize();
  CHECK(host.to_vector<float>() == std::vector<float>(4096, 5.0f));
}

TEST_CASE(
    "a freed block is not handed out while another stream still reads it, once the "
    "tensor was marked with record_stream") {
  const device::Stream side = device::new_stream(kEmu);
  const device::Stream compute = device::current_stream(kEmu);
  for (const bool recorded : {true, false}) {
    CAPTURE(recorded);
    empty_device_cache(kEmu);
    Tensor out;
    {
      Gate gate(side);
      {
        Tensor temp = full({2048}, 1.0, DType::f32, kEmu);  // on the compute stream
        device::Event made = device::record_event(compute);
        device::StreamGuard on(side);
        made.wait(side);
        out = add(temp, 1.0);  // queued behind the gate: reads temp later
        if (recorded) tensor::record_stream(temp, side);
      }  // temp freed here, while the side stream has not read it yet
      Tensor reuse = full({2048}, 100.0, DType::f32, kEmu);  // same size, compute stream
      compute.synchronize();  // 100s are written before the side stream reads
      gate.open();
      side.synchronize();
    }
    const float expected = recorded ? 2.0f : 101.0f;  // unmarked: it read the new tensor
    CHECK(values(out) == std::vector<float>(2048, expected));
  }
}

TEST_CASE("jitter: a missing event wait shows as wrong results, the wait fixes them") {
  device::emu::StreamQueue::set_jitter(1000);  // up to 1 ms before every task, per stream
  struct Reset {
    ~Reset() { device::emu::StreamQueue::set_jitter(0); }
  } reset;
  const device::Stream a = device::new_stream(kEmu), b = device::new_stream(kEmu);
  Generator gen(5);
  for (const bool with_wait : {true, false}) {
    CAPTURE(with_wait);
    int wrong = 0;
    for (int round = 0; round < 8; ++round) {
      const Tensor h = randn({256}, gen);
      Tensor x = zeros({256}, DType::f32, kEmu), y;
      device::synchronize(kEmu);
      device::Event done(kEmu);
      {
        device::StreamGuard on(a);
        copy_(x, h);  // staged copy, then three kernels: several delayed tasks
        mul_(x, 3.0);
        add_(x, 1.0);
        mul_(x, 0.5);
        done.record(a);
      }
      {
        device::StreamGuard on(b);
        if (with_wait) done.wait(b);
        tensor::record_stream(x, b);
        y = sub(x, 0.5);
      }
      device::synchronize(kEmu);
      const Tensor expected = sub(mul(add(mul(h, 3.0), 1.0), 0.5), 0.5);
      if (values(y) != expected.to_vector<float>()) ++wrong;
    }
    if (with_wait) {
      CHECK(wrong == 0);
    } else {
      CHECK(wrong > 0);
    }
  }
}

TEST_CASE("device memory statistics, and out of memory saying what was asked and what is held") {
  empty_device_cache(kEmu);
  const BlockCacheStats start = device_memory_stats(kEmu);
  {
    const Tensor t = empty({1 << 20}, DType::f32, kEmu);  // 4 MiB
    CHECK(device_memory_stats(kEmu).allocated_bytes == start.allocated_bytes + (4u << 20));
  }
  CHECK(device_memory_stats(kEmu).cached_bytes >= 4u << 20);
  const std::int64_t too_many =
      static_cast<std::int64_t>(device::runtime(kEmu).memory_capacity() / 4 + 1);
  try {
    (void)empty({too_many}, DType::f32, kEmu);
    FAIL("an allocation beyond the device's capacity succeeded");
  } catch (const OutOfMemoryError& e) {
    const std::string what = e.what();
    CHECK(what.find("emu:0") != std::string::npos);
    CHECK(what.find("allocating " + std::to_string(too_many * 4) + " bytes") != std::string::npos);
    CHECK(what.find("capacity") != std::string::npos);
    CHECK(what.find("allocated in tensors") != std::string::npos);
  }
}

TEST_CASE("a failed task fails the stream (sticky) and synchronize says so") {
  device::Stream s = device::new_stream(kEmu);
  device::runtime(kEmu).host_func(s.handle(), [] { throw std::runtime_error("kernel fault"); });
  try {
    s.synchronize();
    FAIL("synchronize did not report the failure");
  } catch (const DeviceError& e) {
    CHECK(std::string(e.what()).find("kernel fault") != std::string::npos);
  }
  CHECK_THROWS_AS(s.synchronize(), DeviceError);  // still failed
}

TEST_CASE("a stream that never finishes is a TimeoutError at the device deadline, not a hang") {
  const auto saved = device::wait_timeout();
  device::set_wait_timeout(std::chrono::milliseconds(200));
  const device::Stream s = device::new_stream(kEmu);
  {
    Gate gate(s);
    CHECK_THROWS_AS(s.synchronize(), TimeoutError);
    device::Event e = device::record_event(s);
    CHECK_FALSE(e.query());
    CHECK_THROWS_AS(e.synchronize(), TimeoutError);
  }
  s.synchronize();
  device::set_wait_timeout(saved);
}
