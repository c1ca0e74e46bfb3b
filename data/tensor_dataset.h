// TensorDataset: PyTorch's TensorDataset(inputs, targets): example i is (inputs[i], targets[i]),
// each of any shape and dtype, the same number of rows (dim 0) in both. With a DistributedSampler
// and a DataLoader (no transform), a batch holds inputs [B, ...] in `images` and targets [B, ...]
// in `labels`, each in its own dtype (collate). Both tensors are copied to contiguous host memory
// once, at construction; get() copies one row of each, so it is thread-safe.
#pragma once

#include <cstdint>

#include "data/dataset.h"
#include "tensor/tensor.h"

namespace ringlet::data {

class TensorDataset final : public Dataset {
 public:
  // ValueError when either has no dimension or their row counts differ (naming both shapes).
  TensorDataset(const tensor::Tensor& inputs, const tensor::Tensor& targets);

  std::int64_t size() const override { return rows_; }
  Example get(std::int64_t index) const override;

  const tensor::Tensor& inputs() const { return inputs_; }
  const tensor::Tensor& targets() const { return targets_; }

 private:
  tensor::Tensor inputs_, targets_;  // contiguous, on the host
  std::int64_t rows_ = 0;
};

}  // namespace ringlet::data
