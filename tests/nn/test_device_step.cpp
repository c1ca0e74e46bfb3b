// A training step on a device, counted (device/counters.h): fmnist_cnn at batch 64 on
// the emulated device, which runs the code paths a GPU does, so the counts are a GPU's too.
// The fast path launches a handful of kernels per layer (batched convolutions, fused epilogues,
// one optimizer launch), the loss is read one step late, and nothing reaches the driver once
// the caching allocators are warm.
#include <doctest/doctest.h>

#include <cmath>
#include <vector>

#include "device/counters.h"
#include "device/stream.h"
#include "nn/loss.h"
#include "nn/models.h"
#include "nn/sgd.h"
#include "tensor/device/graph.h"
#include "tensor/device/late_reads.h"
#include "tensor/ops.h"

using namespace ringlet;
using tensor::Tensor;

namespace {

const core::Device kDevice = core::Device::emu(0);

// fmnist_cnn, SGD with momentum and weight decay, one synthetic batch of 64 images, on `device`.
struct Step {
  tensor::Generator gen{3};
  std::shared_ptr<nn::Module> model = nn::make_model("fmnist_cnn", gen, 10, 1);
  Tensor x, y;
  nn::CrossEntropyLoss criterion;
  std::unique_ptr<nn::SGD> sgd;
  tensor::LateReads losses;

  explicit Step(core::Device device) {
    x = tensor::randn({64, 1, 28, 28}, gen).to(device);
    y = tensor::randint(0, 10, {64}, gen).to(device);
    model->train();
    model->to(device);
    sgd = std::make_unique<nn::SGD>(
        model->parameters(), nn::SGDOptions{.lr = 0.05, .momentum = 0.9, .weight_decay = 5e-4});
  }
  // One step's work, queued: its loss, not read.
  Tensor queue_step() {
    sgd->zero_grad();
    Tensor loss = criterion.forward(model->forward(x), y);
    loss.backward();
    sgd->step();
    return loss;
  }
  // One step; returns the loss of the step before (read one step late), NaN for the first.
  double run() {
    losses.push(queue_step());
    return losses.pending() > 1 ? losses.pop() : NAN;
  }
  std::vector<std::vector<float>> params() const {
    std::vector<std::vector<float>> out;
    for (const Tensor& p : model->parameters()) out.push_back(p.cpu().to_vector<float>());
    return out;
  }
};

}  // namespace

TEST_CASE("fmnist_cnn batch 64 on a device: at most 80 stream operations and 1 host wait a step") {
  const tensor::DeterministicGuard fast(false);
  Step step(kDevice), on_host(core::Device::cpu());
  for (int i = 0; i < 3; ++i) {  // warm: momentum buffers, the allocators' caches
    step.run();
    on_host.run();
  }
  constexpr int kSteps = 5;
  const auto before = device::device_counts(kDevice);
  std::vector<double> losses;
  for (int i = 0; i < kSteps; ++i) losses.push_back(step.run());
  const auto used = device::device_counts(kDevice) - before;
  MESSAGE("per step: ", static_cast<double>(used.stream_ops) / kSteps, " stream operations, ",
          static_cast<double>(used.host_syncs) / kSteps, " host synchronizations, ",
          used.driver_allocs, " driver allocations in ", kSteps, " steps");
  CHECK(used.stream_ops <= 80 * kSteps);
  CHECK(used.host_syncs == kSteps);  // the late loss read, one a step
  CHECK(used.driver_allocs == 0);
  // The losses read one step late are the steps' own: the host's run's, within the rounding
  // of the fast path's sums.
  for (int i = 0; i < kSteps; ++i) {
    CAPTURE(i);
    CHECK(losses[i] == doctest::Approx(on_host.run()).epsilon(1e-4));
  }
}

TEST_CASE("a captured training step replays bit for bit as the eager one, with no host wait") {
  const tensor::DeterministicGuard fast(false);
  Step eager(kDevice), graphed(kDevice);
  for (int i = 0; i < 3; ++i) {  // the same warm-up on both (momentum buffers, the caches)
    eager.run();
    graphed.run();
  }
  Tensor loss;  // the graph's static output
  const auto graph =
      tensor::Graph::capture(device::current_stream(kDevice), [&] { loss = graphed.queue_step(); });
  constexpr int kSteps = 4;
  const auto before = device::device_counts(kDevice);
  for (int i = 0; i < kSteps; ++i) graph->replay();
  const auto used = device::device_counts(kDevice) - before;
  CHECK(used.stream_ops == kSteps);  // a launch a step
  CHECK(used.host_syncs == 0);
  for (int i = 0; i < kSteps; ++i) eager.run();
  eager.losses.push(eager.queue_step());
  graph->replay();
  // The same kernels on the same values: the parameters and the last loss, bit for bit.
  CHECK(graphed.params() == eager.params());
  while (eager.losses.pending() > 1) eager.losses.pop();
  CHECK(loss.item() == eager.losses.pop());
}
