// What a run reads: each split's examples (limit_train / limit_test), the per-example
// transform (augmentation on the training split only) and each rank's loaders. What a batch
// holds is a function of the config, the rank's shard and the epoch: the training order of
// (seed, epoch), each image's augmentation of (seed, epoch, dataset index). So an example gets
// the same pixels on any rank, in any world size and with any number of workers, and a run
// resumed after epoch e sees the batches the uninterrupted run would have seen.
#pragma once

#include <memory>

#include "data/data_loader.h"
#include "trainer/config.h"
#include "trainer/dataset_catalog.h"

namespace ringlet::trainer {

// The catalog entry of the config's dataset (a ValueError when there is none).
const DatasetInfo& dataset_of(const TrainConfig& c);

// The split's first limit_train / limit_test examples (all of them for 0).
std::shared_ptr<const data::Dataset> open_split(const TrainConfig& c, data::Split split);

// The per-example transform of a split. Training: RandomCrop(side, crop_padding) and
// RandomHorizontalFlip(0.5) as `augment` asks, on the raw u8 pixels, then ToFloat and
// Normalize(mean, std). Test: ToFloat and Normalize only. mean, std and crop_padding are the
// dataset's where the config leaves them unset.
std::shared_ptr<const data::Transform> input_transform(const TrainConfig& c, data::Split split);

// The training batches of rank `rank` of `world`: shuffled per (seed, epoch), a
// DistributedSampler shard when world > 1, batch_size per rank, `workers` threads.
std::unique_ptr<data::DataLoader> make_train_loader(const TrainConfig& c, int rank, int world);

// The test examples rank `rank` of `world` evaluates: r, r + world, ... (every example once,
// no padding), in batches of 1000, never augmented.
std::unique_ptr<data::DataLoader> make_test_loader(const TrainConfig& c, int rank, int world);

}  // namespace ringlet::trainer
