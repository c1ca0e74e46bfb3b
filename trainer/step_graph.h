// --cuda_graph: the training step captured into one graph and replayed (tensor/device/graph.h).
// After kWarmupSteps eager steps on static device inputs (of the first batch's shape), the whole
// step is captured on them: zero_grad, the forward under its autocast, the loss, backward (with
// several ranks DDP's buffer broadcast and bucket all-reduces, which device flags make
// capturable) and the optimizer. Each later batch of that shape is copied into the inputs, the
// optimizer's per-step values are staged (Optimizer::stage_step: SGD's learning rate), and the
// graph is replayed: one launch, no host wait. A batch of another shape (an epoch's short last
// batch) runs eagerly, after which the parameters' gradients point back at the graph's, so that
// a gradient norm measured after a replay reads the replay's. unsupported() names what refuses a
// capture.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "nn/optimizer.h"
#include "tensor/device/graph.h"
#include "tensor/tensor.h"
#include "trainer/config.h"

namespace ringlet::trainer {

class StepGraph {
 public:
  static constexpr int kWarmupSteps = 3;
  // Queues one step on device inputs and returns its loss (not read).
  using Work =
      std::function<tensor::Tensor(const tensor::Tensor& images, const tensor::Tensor& labels)>;

  // Why this run's step cannot be captured ("" when it can): the CPU, several ranks whose
  // collectives are driven by the host (`device_flags` false: no device flags, or an all-reduce
  // that RINGLET_ALGO sends through the host), f16's loss
  // scaling, clipping, an optimizer other than SGD, tracing.
  static std::string unsupported(const TrainConfig& c, int world, bool device_flags);
  // Whether --cuda_graph (auto, on, off) captures this run's step; "on" with a reason not to
  // is a UsageError naming it. `out` hears which it is.
  static bool wanted(const TrainConfig& c, int world, bool device_flags, std::ostream& out);

  StepGraph(core::Device device, nn::Optimizer& optimizer, Work work);

  // One step on a host batch: eager while warming up or for another batch shape, else (after
  // capturing it once) a replay. Returns the step's loss on the device.
  tensor::Tensor step(const tensor::Tensor& images, const tensor::Tensor& labels);
  bool captured() const { return graph_ != nullptr; }

 private:
  tensor::Tensor eager(const tensor::Tensor& images, const tensor::Tensor& labels);
  void fill_inputs(const tensor::Tensor& images, const tensor::Tensor& labels);
  void capture();

  core::Device device_;
  nn::Optimizer& optimizer_;
  Work work_;
  bool prepared_ = false;              // the optimizer's per-step values are on the device
  int warm_ = 0;                       // eager steps on the static inputs so far
  tensor::Tensor images_, labels_;     // the graph's static inputs
  tensor::Tensor loss_;                // its static output
  std::vector<tensor::Tensor> grads_;  // the parameters' gradients in the graph's memory
  std::unique_ptr<tensor::Graph> graph_;
};

}  // namespace ringlet::trainer
