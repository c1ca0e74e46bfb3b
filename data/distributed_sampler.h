// DistributedSampler with PyTorch's semantics: the epoch's order is a permutation from
// (seed + epoch) when shuffling (identical on every rank), padded by repeating its head so
// that every rank gets the same count (or trimmed with drop_last); rank r takes the indices
// at positions r, r + n, r + 2n, ... set_epoch() must be called every epoch to reshuffle.
#pragma once

#include "data/sampler.h"

namespace ringlet::data {

class DistributedSampler : public Sampler {
 public:
  DistributedSampler(std::int64_t dataset_size, int num_replicas, int rank, bool shuffle = true,
                     std::uint64_t seed = 0, bool drop_last = false);
  std::vector<std::int64_t> indices() const override;
  std::int64_t size() const override { return per_rank_; }

 private:
  std::int64_t n_;
  int replicas_, rank_;
  bool shuffle_, drop_last_;
  std::uint64_t seed_;
  std::int64_t per_rank_;
};

}  // namespace ringlet::data
