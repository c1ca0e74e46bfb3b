// The datasets `ringlet train --dataset NAME` knows: for each, the shape of its images, its
// classes, the per-channel normalization a run uses unless --mean/--std say otherwise, the
// padding of --augment crop, and whether it needs --data_dir (no Debian package puts it in a
// default place). One table, so config validation, the --help text and the training loop
// cannot disagree.
#pragma once

#include <cstdint>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "data/dataset.h"
#include "data/idx_dataset.h"

namespace ringlet::trainer {

// How a dataset's files are laid out.
enum class DatasetFormat { idx, cifar_binary };  // IdxDataset, CifarDataset

struct DatasetInfo {
  std::string name;  // as --dataset spells it
  DatasetFormat format;
  std::int64_t channels;  // of every image
  std::int64_t side;      // images are side x side pixels
  std::int64_t classes;
  std::vector<double> mean, std;  // per channel, of pixels scaled to [0, 1]
  std::int64_t crop_padding;      // pixels; what --augment crop pads by unless --crop_padding
  bool needs_data_dir;            // true: it has no default directory
  std::string files;              // what the data directory holds, for messages
  // Where its files are read from when --data_dir is left at its default (Fashion-MNIST's
  // directory); "" when it needs --data_dir.
  std::string default_dir;
  std::vector<std::string> class_names;  // by label
};

const std::vector<DatasetInfo>& dataset_catalog();
// The entry for `name`, or nullptr when there is none.
const DatasetInfo* find_dataset(const std::string& name);
// "fashion-mnist, mnist, cifar10": for error messages and --help.
std::string dataset_names();
// The split's files in `dir` (IdxDataset or CifarDataset); DataError when they are missing.
std::shared_ptr<const data::Dataset> open_dataset(const DatasetInfo& info,
                                                  const std::filesystem::path& dir,
                                                  data::Split split);

}  // namespace ringlet::trainer
