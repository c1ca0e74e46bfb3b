// DistributedSampler: see the header; the arithmetic follows torch.utils.data.DistributedSampler.
#include "data/distributed_sampler.h"

#include <numeric>

#include "core/error.h"

namespace ringlet::data {

DistributedSampler::DistributedSampler(std::int64_t dataset_size, int num_replicas, int rank,
                                       bool shuffle, std::uint64_t seed, bool drop_last)
    : n_(dataset_size),
      replicas_(num_replicas),
      rank_(rank),
      shuffle_(shuffle),
      drop_last_(drop_last),
      seed_(seed) {
  RINGLET_CHECK(num_replicas >= 1 && rank >= 0 && rank < num_replicas, ValueError,
                "DistributedSampler: rank ", rank, " is outside [0, ", num_replicas, ")");
  RINGLET_CHECK(dataset_size >= 0, ValueError, "DistributedSampler: negative dataset size");
  per_rank_ = drop_last && n_ % replicas_ != 0 ? n_ / replicas_ : (n_ + replicas_ - 1) / replicas_;
}

std::vector<std::int64_t> DistributedSampler::indices() const {
  std::vector<std::int64_t> order;
  if (shuffle_) {
    order = random_permutation(n_, seed_ + static_cast<std::uint64_t>(epoch_));
  } else {
    order.resize(static_cast<std::size_t>(n_));
    std::iota(order.begin(), order.end(), 0);
  }
  const std::int64_t total = per_rank_ * replicas_;
  if (static_cast<std::int64_t>(order.size()) < total && !order.empty()) {
    // pad by repeating the head (several times over if the dataset is tiny)
    const std::size_t original = order.size();
    for (std::size_t i = 0; static_cast<std::int64_t>(order.size()) < total; ++i) {
      order.push_back(order[i % original]);
    }
  }
  order.resize(static_cast<std::size_t>(total));
  std::vector<std::int64_t> mine;
  mine.reserve(static_cast<std::size_t>(per_rank_));
  for (std::int64_t i = rank_; i < total; i += replicas_) mine.push_back(order[i]);
  return mine;
}

}  // namespace ringlet::data
