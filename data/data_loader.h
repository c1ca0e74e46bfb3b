// DataLoader: turns a Dataset, a Sampler and a Transform into batches {images f32 [B,C,H,W],
// labels i64 [B]}, or, for examples with targets (TensorDataset), {inputs [B, ...], targets
// [B, ...]} in their own dtypes. With N worker threads, up to prefetch_factor * N batches are built
// ahead of the consumer (a bounded queue) and handed out strictly in order. A batch's content
// depends only on (sampler order, seed, epoch), never on N or thread timing, so 0, 1 or 8
// workers give bitwise identical batches. Usage:
//   auto it = loader.begin_epoch(epoch);
//   while (auto batch = it.next()) { ... }
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <vector>

#include "data/dataset.h"
#include "data/sampler.h"
#include "data/transforms.h"
#include "tensor/tensor.h"

namespace ringlet::data {

struct Batch {
  tensor::Tensor images;              // f32 [B, C, H, W], or the inputs [B, ...] (see collate)
  tensor::Tensor labels;              // i64 [B], or the targets [B, ...] (see collate)
  std::vector<std::int64_t> indices;  // the dataset index of each row
  std::int64_t number = 0;            // position of this batch in its epoch
};

struct DataLoaderOptions {
  std::int64_t batch_size = 64;
  bool drop_last = false;   // drop a final batch smaller than batch_size
  int num_workers = 0;      // 0: next() builds each batch on the calling thread
  int prefetch_factor = 2;  // batches in flight per worker
  std::uint64_t seed = 0;   // augmentation seed (see SampleRng)
  // Longest next() waits for one batch, and for stuck workers when an iterator is destroyed.
  std::chrono::milliseconds timeout{std::chrono::minutes(5)};
};

// Stacks examples into a Batch. Images: all f32 with one shape [C, H, W]; a u8 image is a
// DTypeError that suggests ToFloat. Examples with a target (all or none of them): inputs and
// targets each of one shape and dtype, any, stacked into images [B, ...] and labels [B, ...].
// Differing shapes are a ShapeError, differing dtypes a DTypeError, naming the example.
Batch collate(const std::vector<Example>& examples);

// One pass over an epoch. Owns its worker threads: destroying it mid-epoch stops them and
// joins them (each finishes at most the example it is on). Movable, not copyable; use it
// from one thread.
class EpochIterator {
 public:
  struct State;  // shared with the worker threads (data_loader.cpp)
  explicit EpochIterator(std::shared_ptr<State> state);
  EpochIterator(EpochIterator&& other) noexcept;
  EpochIterator& operator=(EpochIterator&& other) noexcept;
  ~EpochIterator();

  // The next batch in order, or nullopt after the last one. Throws the exception a worker
  // hit building this batch (and again on every later call), or core::TimeoutError when a
  // batch takes longer than options.timeout.
  std::optional<Batch> next();
  std::int64_t num_batches() const;

 private:
  void shutdown() noexcept;
  std::shared_ptr<State> state_;
};

class DataLoader {
 public:
  // `transform` may be null when the dataset already yields f32 images; `sampler` defaults
  // to a SequentialSampler over the dataset.
  DataLoader(std::shared_ptr<const Dataset> dataset, DataLoaderOptions options,
             std::shared_ptr<const Transform> transform = nullptr,
             std::shared_ptr<Sampler> sampler = nullptr);

  // Sets the sampler's epoch (so a RandomSampler reshuffles) and starts the workers. A
  // first_batch > 0 starts there (a run resumed inside an epoch): the batches are the ones the
  // whole epoch's pass would have built from that number on. ValueError past the last batch.
  EpochIterator begin_epoch(std::int64_t epoch, std::int64_t first_batch = 0);
  std::int64_t num_batches() const;
  const DataLoaderOptions& options() const { return options_; }
  Sampler& sampler() { return *sampler_; }

 private:
  std::shared_ptr<const Dataset> dataset_;
  DataLoaderOptions options_;
  std::shared_ptr<const Transform> transform_;
  std::shared_ptr<Sampler> sampler_;
};

}  // namespace ringlet::data
