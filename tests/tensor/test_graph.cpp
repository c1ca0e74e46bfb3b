// Graph capture and replay on the emulated device (tensor/device/graph.h), which records a
// stream's tasks as CUDA records a stream's kernels: a replay reruns the captured work on the
// same memory (static inputs refilled between replays give new results), costs one stream
// operation and no host synchronization; the memory the capture allocated stays the graph's;
// what a capture cannot hold is refused, naming it, and leaves the device usable.
#include <doctest/doctest.h>

#include <vector>

#include "device/counters.h"
#include "device/stream.h"
#include "tensor/device/allocator.h"
#include "tensor/device/graph.h"
#include "tensor/ops.h"

using namespace ringlet;
using namespace ringlet::tensor;

namespace {

const core::Device kDevice = core::Device::emu(0);

std::vector<float> values(const Tensor& t) { return t.cpu().to_vector<float>(); }

}  // namespace

TEST_CASE("a captured graph replays its ops on static inputs: new inputs, new results") {
  const device::Stream stream = device::new_stream(kDevice);
  const device::StreamGuard on(stream);
  Tensor x = from_vector({1.0f, -2.0f, 3.0f}, {3}).to(kDevice);
  const Tensor w = from_vector({2.0f, 2.0f, 2.0f}, {3}).to(kDevice);
  Tensor y;
  const auto work = [&] { y = relu(add(mul(x, w), 1.0)); };
  work();  // warm, twice: the cache then holds every block the capture wants, as a step's old
  work();  // outputs are still alive while its new ones are made (PyTorch warms up three times)
  const auto graph = tensor::Graph::capture(stream, work);
  // Captured, not run: y holds the capture's memory, not yet written.
  const auto before = device::device_counts(kDevice);
  graph->replay();
  const auto used = device::device_counts(kDevice) - before;
  CHECK(used.stream_ops == 1);
  CHECK(used.host_syncs == 0);
  CHECK(values(y) == std::vector<float>{3.0f, 0.0f, 7.0f});
  copy_(x, from_vector({-1.0f, 4.0f, 0.5f}, {3}).to(kDevice));  // a new static input
  graph->replay();
  CHECK(values(y) == std::vector<float>{0.0f, 9.0f, 2.0f});
}

TEST_CASE("memory a capture allocated stays the graph's: no other tensor gets it") {
  const device::Stream stream = device::new_stream(kDevice);
  const device::StreamGuard on(stream);
  const Tensor x = full({1000}, 2.0, DType::f32, kDevice);
  Tensor out;
  const void* scratch = nullptr;
  const auto work = [&] {
    const Tensor t = mul(x, 3.0);  // freed inside the work: the graph's scratch
    scratch = t.raw_data();
    out = add(t, 1.0);
  };
  work();
  work();
  auto graph = tensor::Graph::capture(stream, work);
  const void* captured_scratch = scratch;
  for (int i = 0; i < 4; ++i) {
    const Tensor other = empty({1000}, DType::f32, kDevice);  // the same size, eagerly
    CHECK(other.raw_data() != captured_scratch);
    CHECK(other.raw_data() != out.raw_data());
  }
  graph->replay();
  CHECK(values(out) == std::vector<float>(1000, 7.0f));
  graph.reset();  // the pool goes back to the cache
  bool reused = false;
  for (int i = 0; i < 4 && !reused; ++i) {
    reused = empty({1000}, DType::f32, kDevice).raw_data() == captured_scratch;
  }
  CHECK(reused);
}

TEST_CASE("what a capture cannot hold is refused, naming it and the op; the device goes on") {
  const device::Stream stream = device::new_stream(kDevice);
  const device::StreamGuard on(stream);
  const Tensor x = full({16}, 1.5, DType::f32, kDevice);
  const auto refused = [&](const std::function<void()>& work) {
    std::string message;
    try {
      tensor::Graph::capture(stream, work);
    } catch (const core::CaptureError& e) {
      message = e.what();
    }
    return message;
  };
  // Each work runs once eagerly first, so that the cache holds what it allocates and the
  // refusal is the one named (not the allocation's, which depends on what ran before).
  // A host read.
  (void)sum(relu(x)).item();
  std::string m = refused([&] { (void)sum(relu(x)).item(); });
  CHECK(m.find("a wait of the host for the stream (a host read") != std::string::npos);
  CHECK(m.find("cannot be captured into a graph") != std::string::npos);
  INFO(m);
  CHECK(m.find("in the op after ") != std::string::npos);
  // An upload from pageable host memory (its staging is released by a host function).
  (void)from_vector({1.0f}, {1}).to(kDevice);
  m = refused([&] { (void)from_vector({1.0f}, {1}).to(kDevice); });
  CHECK(m.find("a host function") != std::string::npos);
  // An allocation the cache cannot serve: a size the work never ran with.
  m = refused([&] { (void)empty({123457}, DType::f32, kDevice); });
  CHECK(m.find("bytes that the allocator's cache does not hold") != std::string::npos);
  CHECK(m.find("run the work once before capturing it") != std::string::npos);
  // Dropout draws its seed on the host.
  Generator gen(1);
  (void)dropout(x, 0.5, true, gen);
  m = refused([&] { (void)dropout(x, 0.5, true, gen); });
  CHECK(m.find("dropout draws its seed on the host") != std::string::npos);
  // Nothing is left capturing: eager work runs and reads back.
  CHECK_FALSE(tensor::capturing(kDevice));
  CHECK(sum(x).item() == doctest::Approx(24.0));
}
