// MNIST / Fashion-MNIST in the IDX format (gzip or raw), loaded whole into memory.
// An IDX file is a big-endian header (magic 0x00000803 for u8 images with 3 dims,
// 0x00000801 for u8 labels with 1 dim, then one u32 per dim) followed by the bytes.
// Every problem (missing, truncated, bad magic, counts that disagree) is a DataError naming
// the file and what was expected.
#pragma once

#include <cstdint>
#include <filesystem>
#include <functional>
#include <string>
#include <vector>

#include "data/dataset.h"

namespace ringlet::data {

// Where Debian's `dataset-fashion-mnist` package puts the Fashion-MNIST files.
inline constexpr const char* kDefaultDataDir = "/usr/share/datasets/fashion-mnist";
// MNIST's default directory, next to it (no Debian package installs MNIST).
inline constexpr const char* kDefaultMnistDir = "/usr/share/datasets/mnist";

enum class Split { train, test };

// How many bytes a data file may hold once decompressed: what its header announces, once its
// first `head_bytes` are known (`announced`, which may throw a DataError on a bad header), and
// never more than `most`. A gzip stream is stopped as soon as it inflates past the limit.
struct SizeLimit {
  std::uint64_t most = std::uint64_t{1} << 30;
  std::size_t head_bytes = 0;
  std::function<std::uint64_t(const std::uint8_t* head)> announced;  // null: `most` alone
};

// The whole content of a data file, gunzipped when it starts with the gzip magic.
// DataError names the file when it is missing, unreadable, larger than `limit` or not a valid
// gzip stream.
std::vector<std::uint8_t> read_data_file(const std::filesystem::path& path,
                                         const SizeLimit& limit = {});

class IdxDataset : public Dataset {
 public:
  // The split's files in `dir`: {train,t10k}-images-idx3-ubyte and {train,t10k}-labels-idx1-ubyte,
  // each with or without `.gz` (the .gz is tried first). When `dir` is the default directory
  // and a file is missing, the error says how to install the package.
  static IdxDataset open(const std::filesystem::path& dir = kDefaultDataDir,
                         Split split = Split::train);
  // Explicit files; the image and label counts must agree.
  IdxDataset(const std::filesystem::path& images, const std::filesystem::path& labels);

  std::int64_t size() const override { return count_; }
  // image: u8 [1, rows, cols], a view into the loaded file.
  Example get(std::int64_t index) const override;

  std::int64_t rows() const { return rows_; }
  std::int64_t cols() const { return cols_; }
  const std::vector<std::uint8_t>& labels() const { return labels_; }
  // DataError naming the labels file, the first example whose label is not below `classes`,
  // its value and `dataset`'s range (a file of another dataset, or a damaged one).
  void check_labels(std::int64_t classes, const std::string& dataset) const;

 private:
  std::filesystem::path labels_path_;
  std::int64_t count_ = 0, rows_ = 0, cols_ = 0;
  tensor::Tensor images_;  // u8 [count, 1, rows, cols]
  std::vector<std::uint8_t> labels_;
};

}  // namespace ringlet::data
