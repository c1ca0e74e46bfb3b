// The data side of a run: dataset prefixes, the test split's shards, the transforms a config
// names and the loaders built from them (see input_pipeline.h).
#include "trainer/input_pipeline.h"

#include <algorithm>

#include "core/error.h"
#include "data/distributed_sampler.h"

namespace ringlet::trainer {
namespace {

// The first `limit` examples of another dataset (limit_train / limit_test).
class Prefix : public data::Dataset {
 public:
  Prefix(std::shared_ptr<const data::Dataset> inner, std::int64_t limit)
      : inner_(std::move(inner)),
        size_(limit > 0 ? std::min(limit, inner_->size()) : inner_->size()) {}
  std::int64_t size() const override { return size_; }
  data::Example get(std::int64_t index) const override { return inner_->get(index); }

 private:
  std::shared_ptr<const data::Dataset> inner_;
  std::int64_t size_;
};

// Rank r of n evaluates examples r, r + n, ... (no padding: every example counts once).
class ShardSampler : public data::Sampler {
 public:
  ShardSampler(std::int64_t n, int rank, int world) : n_(n), rank_(rank), world_(world) {}
  std::vector<std::int64_t> indices() const override {
    std::vector<std::int64_t> out;
    for (std::int64_t i = rank_; i < n_; i += world_) out.push_back(i);
    return out;
  }
  std::int64_t size() const override { return n_ > rank_ ? (n_ - rank_ + world_ - 1) / world_ : 0; }

 private:
  std::int64_t n_;
  int rank_, world_;
};

// One value per channel; a single configured value (or the dataset's) applies to every one.
std::vector<float> per_channel(const std::vector<double>& configured,
                               const std::vector<double>& dataset_values, std::int64_t channels,
                               const char* key) {
  const std::vector<double>& values = configured.empty() ? dataset_values : configured;
  RINGLET_CHECK(values.size() == 1 || static_cast<std::int64_t>(values.size()) == channels,
                ValueError, key, ": ", values.size(), " values for ", channels, " channels");
  std::vector<float> out;
  for (std::int64_t ch = 0; ch < channels; ++ch) {
    out.push_back(static_cast<float>(values[values.size() == 1 ? 0 : ch]));
  }
  return out;
}

data::DataLoaderOptions loader_options(const TrainConfig& c, std::int64_t batch_size) {
  data::DataLoaderOptions options;
  options.batch_size = batch_size;
  options.num_workers = c.workers;
  options.seed = c.seed;
  return options;
}

}  // namespace

const DatasetInfo& dataset_of(const TrainConfig& c) {
  const DatasetInfo* info = find_dataset(c.dataset);
  RINGLET_CHECK(info != nullptr, ValueError, "unknown dataset '", c.dataset,
                "' (valid: ", dataset_names(), ")");
  return *info;
}

std::shared_ptr<const data::Dataset> open_split(const TrainConfig& c, data::Split split) {
  auto data = open_dataset(dataset_of(c), c.data_dir, split);
  return std::make_shared<Prefix>(data, split == data::Split::train ? c.limit_train : c.limit_test);
}

std::shared_ptr<const data::Transform> input_transform(const TrainConfig& c, data::Split split) {
  const DatasetInfo& data = dataset_of(c);
  Augmentations augment;  // none on the test split
  if (split == data::Split::train) augment = parse_augment(c.augment);
  std::vector<std::shared_ptr<const data::Transform>> steps;
  // On the raw pixels, so the padding is black (0) before normalization: torchvision pads the
  // PIL image before ToTensor and Normalize. Crop before flip, torchvision's CIFAR order.
  if (augment.crop) {
    const std::int64_t padding = c.crop_padding.value_or(static_cast<int>(data.crop_padding));
    steps.push_back(std::make_shared<data::RandomCrop>(data.side, padding));
  }
  if (augment.flip) steps.push_back(std::make_shared<data::RandomHorizontalFlip>(0.5));
  steps.push_back(std::make_shared<data::ToFloat>());
  steps.push_back(
      std::make_shared<data::Normalize>(per_channel(c.mean, data.mean, data.channels, "mean"),
                                        per_channel(c.std, data.std, data.channels, "std")));
  // After Normalize, as torchvision's RandomErasing: the erased patch takes the mean (0).
  if (augment.erase) steps.push_back(std::make_shared<data::RandomErasing>());
  return std::make_shared<data::Compose>(std::move(steps));
}

std::unique_ptr<data::DataLoader> make_train_loader(const TrainConfig& c, int rank, int world) {
  auto data = open_split(c, data::Split::train);
  std::shared_ptr<data::Sampler> sampler;
  if (world > 1) {
    sampler = std::make_shared<data::DistributedSampler>(data->size(), world, rank, true, c.seed);
  } else {
    sampler = std::make_shared<data::RandomSampler>(data->size(), c.seed);
  }
  return std::make_unique<data::DataLoader>(data, loader_options(c, c.batch_size),
                                            input_transform(c, data::Split::train), sampler);
}

std::unique_ptr<data::DataLoader> make_test_loader(const TrainConfig& c, int rank, int world) {
  auto data = open_split(c, data::Split::test);
  return std::make_unique<data::DataLoader>(
      data, loader_options(c, 1000), input_transform(c, data::Split::test),
      std::make_shared<ShardSampler>(data->size(), rank, world));
}

}  // namespace ringlet::trainer
