// The Dataset interface every data source implements (IDX, CIFAR-10, or a test's own), the
// Example it yields, and DataError, the exception for unreadable or inconsistent data files.
// A Dataset is immutable once built: get() is const and is called concurrently from the
// DataLoader's worker threads, so implementations must be thread-safe for reads.
#pragma once

#include <cstdint>

#include "core/error.h"
#include "tensor/tensor.h"

namespace ringlet::data {

// A data file that is missing, truncated or inconsistent. The message names the file and
// what was expected.
class DataError : public core::Error {
 public:
  using core::Error::Error;
};

struct Example {
  // [C, H, W], u8 (raw pixels) or f32; or, with a target, any shape and dtype (an input). It may
  // be a view into the dataset's own memory: treat it as read-only (transforms always return new
  // tensors).
  tensor::Tensor image;
  std::int64_t label = 0;
  // A target of any shape and dtype (TensorDataset's), batched instead of `label` when defined.
  tensor::Tensor target{};
};

class Dataset {
 public:
  virtual ~Dataset() = default;
  virtual std::int64_t size() const = 0;
  // 0 <= index < size(); out of range throws core::ValueError. Thread-safe.
  virtual Example get(std::int64_t index) const = 0;
};

}  // namespace ringlet::data
