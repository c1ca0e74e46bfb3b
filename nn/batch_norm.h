// BatchNorm2d as torch.nn.BatchNorm2d: affine weight (1) and bias (0); buffers running_mean
// (0), running_var (1) and num_batches_tracked (i64 0-d), in that order. Training normalizes
// with the batch statistics and updates the running ones; eval uses the running ones.
// With a stats reducer (set_stats_reducer, e.g. an all-reduce over the ranks of a job) it is
// PyTorch's SyncBatchNorm: training statistics are those of the global batch.
#pragma once

#include <cstdint>
#include <optional>

#include "nn/module.h"
#include "tensor/ops/norm.h"

namespace ringlet::nn {

struct BatchNormOptions {
  double eps = 1e-5;
  // nullopt: cumulative moving average (momentum 1 / num_batches_tracked), as PyTorch's None.
  std::optional<double> momentum = 0.1;
  bool affine = true;
  bool track_running_stats = true;
};

class BatchNorm2d : public Module {
 public:
  explicit BatchNorm2d(std::int64_t num_features, const BatchNormOptions& options = {});

  // input [N, C, H, W]. Without tracked statistics, eval also uses the batch statistics.
  Tensor forward(const Tensor& input) override;
  // ... then `act`: relu(forward(input)), the normalization and the ReLU one kernel on a device.
  Tensor forward(const Tensor& input, tensor::Activation act);
  std::string type_name() const override { return reducer_ ? "SyncBatchNorm" : "BatchNorm2d"; }
  // Synchronizes the training statistics through `reducer` (empty: back to local statistics).
  void set_stats_reducer(tensor::StatsReducer reducer) { reducer_ = std::move(reducer); }
  std::string extra_repr() const override;

  std::int64_t num_features() const { return num_features_; }
  const BatchNormOptions& options() const { return options_; }
  // Undefined when not affine / not tracking running statistics.
  const Tensor& weight() const { return weight_; }
  const Tensor& bias() const { return bias_; }
  const Tensor& running_mean() const { return running_mean_; }
  const Tensor& running_var() const { return running_var_; }
  const Tensor& num_batches_tracked() const { return num_batches_tracked_; }

 private:
  std::int64_t num_features_;
  BatchNormOptions options_;
  Tensor weight_, bias_, running_mean_, running_var_, num_batches_tracked_;
  tensor::StatsReducer reducer_;
};

}  // namespace ringlet::nn
