// Samplers decide which dataset indices an epoch visits, and in which order. As in PyTorch,
// the epoch is set with set_epoch() before asking for indices(); a sampler that shuffles
// derives its order from (seed, epoch) only, so every process that shares the seed agrees
// on it and a resumed run replays the same order. DistributedSampler (distributed_sampler.h)
// shards on the same interface (random_permutation below is the shared shuffle).
#pragma once

#include <cstdint>
#include <vector>

namespace ringlet::data {

class Sampler {
 public:
  virtual ~Sampler() = default;
  virtual void set_epoch(std::int64_t epoch) { epoch_ = epoch; }
  std::int64_t epoch() const { return epoch_; }
  // The indices of the current epoch, in visiting order.
  virtual std::vector<std::int64_t> indices() const = 0;
  // How many indices() returns.
  virtual std::int64_t size() const = 0;

 protected:
  std::int64_t epoch_ = 0;
};

// 0, 1, ..., n-1 every epoch.
class SequentialSampler : public Sampler {
 public:
  explicit SequentialSampler(std::int64_t n);
  std::vector<std::int64_t> indices() const override;
  std::int64_t size() const override { return n_; }

 private:
  std::int64_t n_;
};

// A permutation of 0..n-1 that depends only on (seed, epoch).
class RandomSampler : public Sampler {
 public:
  RandomSampler(std::int64_t n, std::uint64_t seed);
  std::vector<std::int64_t> indices() const override;
  std::int64_t size() const override { return n_; }

 private:
  std::int64_t n_;
  std::uint64_t seed_;
};

// torch.randperm(n) with a generator seeded with `seed`: the same on every machine.
std::vector<std::int64_t> random_permutation(std::int64_t n, std::uint64_t seed);

}  // namespace ringlet::data
