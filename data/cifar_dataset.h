// CIFAR-10 in its binary form: files of 3073-byte records (1 label byte, then 3072 pixel
// bytes: 1024 red, 1024 green, 1024 blue, each 32x32 row-major). The train split is
// data_batch_1..5.bin, the test split test_batch.bin. Loaded whole into memory; a file whose
// size is not a whole number of records, or a label above 9, is a DataError naming the file.
#pragma once

#include <cstdint>
#include <filesystem>
#include <vector>

#include "data/dataset.h"
#include "data/idx_dataset.h"

namespace ringlet::data {

class CifarDataset : public Dataset {
 public:
  static constexpr std::int64_t kChannels = 3, kSide = 32, kClasses = 10;
  static constexpr std::int64_t kRecordBytes = 1 + kChannels * kSide * kSide;

  // The split's files in `dir` (see above).
  static CifarDataset open(const std::filesystem::path& dir, Split split);
  // Explicit batch files, concatenated in the order given.
  explicit CifarDataset(const std::vector<std::filesystem::path>& files);

  std::int64_t size() const override { return count_; }
  // image: u8 [3, 32, 32], a view into the loaded data.
  Example get(std::int64_t index) const override;

  const std::vector<std::uint8_t>& labels() const { return labels_; }

 private:
  std::int64_t count_ = 0;
  tensor::Tensor images_;  // u8 [count, 3, 32, 32]
  std::vector<std::uint8_t> labels_;
};

}  // namespace ringlet::data
