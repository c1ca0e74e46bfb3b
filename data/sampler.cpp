// Sequential and seeded random samplers. The random order is torch.randperm's: tensor::Generator
// draws what torch's CPU generator draws, and the shuffle is randperm_cpu's (position i swaps with
// i + random() % (n - i)), so a seed gives PyTorch's permutation with any standard library.
#include "data/sampler.h"

#include <numeric>

#include "core/error.h"
#include "data/transforms.h"
#include "tensor/generator.h"

namespace ringlet::data {

std::vector<std::int64_t> random_permutation(std::int64_t n, std::uint64_t seed) {
  RINGLET_CHECK(n >= 0, ValueError, "random_permutation: n must be >= 0, got ", n);
  std::vector<std::int64_t> order(static_cast<std::size_t>(n));
  std::iota(order.begin(), order.end(), std::int64_t{0});
  tensor::Generator gen(seed);
  for (std::int64_t i = 0; i + 1 < n; ++i) {
    const auto j = i + static_cast<std::int64_t>(gen.random() % static_cast<std::uint64_t>(n - i));
    std::swap(order[static_cast<std::size_t>(i)], order[static_cast<std::size_t>(j)]);
  }
  return order;
}

SequentialSampler::SequentialSampler(std::int64_t n) : n_(n) {
  RINGLET_CHECK(n >= 0, ValueError, "SequentialSampler: size must be >= 0, got ", n);
}

std::vector<std::int64_t> SequentialSampler::indices() const {
  std::vector<std::int64_t> order(static_cast<std::size_t>(n_));
  std::iota(order.begin(), order.end(), std::int64_t{0});
  return order;
}

RandomSampler::RandomSampler(std::int64_t n, std::uint64_t seed) : n_(n), seed_(seed) {
  RINGLET_CHECK(n >= 0, ValueError, "RandomSampler: size must be >= 0, got ", n);
}

std::vector<std::int64_t> RandomSampler::indices() const {
  // Mixing (seed, epoch) rather than adding them keeps seed 1 / epoch 0 and seed 0 / epoch 1
  // from sharing an order.
  return random_permutation(n_, mix64(seed_ ^ mix64(static_cast<std::uint64_t>(epoch_))));
}

}  // namespace ringlet::data
