// StepGraph: warm up, capture on static inputs, replay; eager for other shapes.
#include "trainer/step_graph.h"

#include <ostream>

#include "core/error.h"
#include "device/stream.h"
#include "tensor/ops.h"
#include "trainer/usage_error.h"

namespace ringlet::trainer {

std::string StepGraph::unsupported(const TrainConfig& c, int world, bool device_flags) {
  if (core::parse_device(c.device).is_cpu()) return "a graph captures a device's work";
  if (world > 1 && !device_flags) {
    return "several ranks without device flags (or with RINGLET_ALGO naming a host-driven "
           "algorithm): DDP's collectives are driven by the host";
  }
  if (world > 1 && c.sync_bn) return "SyncBatchNorm's statistics cross through the host";
  if (c.precision == "f16") {
    return "f16's loss scaling reads the gradients' overflow on the host every step";
  }
  if (c.clip_grad_norm > 0) return "clipping reads the gradients' norm on the host every step";
  if (c.optimizer != "sgd") {
    return c.optimizer + "'s bias corrections follow the host's step count";
  }
  if (c.trace_steps > 0) return "tracing times each step's phases on the host";
  return "";
}

bool StepGraph::wanted(const TrainConfig& c, int world, bool device_flags, std::ostream& out) {
  if (c.cuda_graph == "off") return false;
  const std::string why = unsupported(c, world, device_flags);
  if (c.cuda_graph == "on") {
    if (!why.empty()) {
      throw UsageError("--cuda_graph on: this run's step cannot be captured (" + why + ")");
    }
  } else if (!why.empty() || !core::parse_device(c.device).is_cuda()) {
    return false;  // auto: on a GPU, when the step can be captured
  }
  out << "cuda_graph: the step is captured after " << kWarmupSteps << " eager steps and replayed"
      << std::endl;
  return true;
}

StepGraph::StepGraph(core::Device device, nn::Optimizer& optimizer, Work work)
    : device_(device), optimizer_(optimizer), work_(std::move(work)) {}

tensor::Tensor StepGraph::eager(const tensor::Tensor& images, const tensor::Tensor& labels) {
  optimizer_.stage_step();
  tensor::Tensor loss = work_(images.to(device_), labels.to(device_));
  if (graph_ != nullptr) {  // the graph's gradients again, for whoever reads .grad
    const auto& params = optimizer_.parameters();
    for (std::size_t i = 0; i < params.size(); ++i) params[i].set_grad(grads_[i]);
  }
  return loss;
}

// The static inputs of a new batch shape, filled from the batch; the warm-up steps run on them
// too, so that the caching allocator has seen the very allocations the capture makes.
void StepGraph::fill_inputs(const tensor::Tensor& images, const tensor::Tensor& labels) {
  if (!images_.defined() || images_.shape() != images.shape() ||
      labels_.shape() != labels.shape()) {
    images_ = tensor::empty(images.shape(), images.dtype(), device_);
    labels_ = tensor::empty(labels.shape(), labels.dtype(), device_);
    warm_ = 0;
  }
  tensor::copy_(images_, images);
  tensor::copy_(labels_, labels);
}

void StepGraph::capture() {
  optimizer_.stage_step();
  graph_ = tensor::Graph::capture(device::current_stream(device_),
                                  [&] { loss_ = work_(images_, labels_); });
  for (const tensor::Tensor& p : optimizer_.parameters()) grads_.push_back(p.grad());
}

tensor::Tensor StepGraph::step(const tensor::Tensor& images, const tensor::Tensor& labels) {
  if (graph_ != nullptr &&
      (images.shape() != images_.shape() || labels.shape() != labels_.shape())) {
    return eager(images, labels);  // another shape than the graph's
  }
  if (!prepared_) {  // before the warm-up: what it allocates must not come between it and capture
    const std::string why = optimizer_.prepare_capture(device_);
    if (!why.empty()) throw UsageError("--cuda_graph: " + why);
    prepared_ = true;
  }
  fill_inputs(images, labels);
  if (graph_ == nullptr && warm_ < kWarmupSteps) {
    ++warm_;
    optimizer_.stage_step();
    return work_(images_, labels_);
  }
  if (graph_ == nullptr) capture();
  optimizer_.stage_step();
  graph_->replay();
  return loss_;
}

}  // namespace ringlet::trainer
