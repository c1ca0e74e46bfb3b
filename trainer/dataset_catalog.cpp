// The dataset table: what each --dataset is, its image shape, its normalization statistics
// (torchvision's) and whether it needs --data_dir (the default data_dir holds Fashion-MNIST).
#include "trainer/dataset_catalog.h"

#include "data/cifar_dataset.h"

namespace ringlet::trainer {

const std::vector<DatasetInfo>& dataset_catalog() {
  static const std::vector<DatasetInfo> catalog = {
      {.name = "fashion-mnist",
       .format = DatasetFormat::idx,
       .channels = 1,
       .side = 28,
       .classes = 10,
       .mean = {0.2860},
       .std = {0.3530},
       .crop_padding = 2,
       .needs_data_dir = false,
       .files = "{train,t10k}-{images-idx3,labels-idx1}-ubyte[.gz]",
       .default_dir = data::kDefaultDataDir,
       .class_names = {"T-shirt/top", "Trouser", "Pullover", "Dress", "Coat", "Sandal", "Shirt",
                       "Sneaker", "Bag", "Ankle boot"}},
      {.name = "mnist",
       .format = DatasetFormat::idx,
       .channels = 1,
       .side = 28,
       .classes = 10,
       .mean = {0.1307},  // torchvision's MNIST statistics
       .std = {0.3081},
       .crop_padding = 2,
       .needs_data_dir = false,
       .files = "{train,t10k}-{images-idx3,labels-idx1}-ubyte[.gz]",
       .default_dir = data::kDefaultMnistDir,  // no Debian package: the user puts the files there
       .class_names = {"0", "1", "2", "3", "4", "5", "6", "7", "8", "9"}},
      {.name = "cifar10",
       .format = DatasetFormat::cifar_binary,
       .channels = data::CifarDataset::kChannels,
       .side = data::CifarDataset::kSide,
       .classes = data::CifarDataset::kClasses,
       .mean = {0.4914, 0.4822, 0.4465},
       .std = {0.2470, 0.2435, 0.2616},
       .crop_padding = 4,  // torchvision's CIFAR recipe: RandomCrop(32, padding=4)
       .needs_data_dir = true,
       .files = "data_batch_1..5.bin, test_batch.bin (the binary version)",
       .default_dir = "",
       .class_names = {"airplane", "automobile", "bird", "cat", "deer", "dog", "frog", "horse",
                       "ship", "truck"}},
  };
  return catalog;
}

const DatasetInfo* find_dataset(const std::string& name) {
  for (const auto& info : dataset_catalog()) {
    if (info.name == name) return &info;
  }
  return nullptr;
}

std::string dataset_names() {
  std::string names;
  for (const auto& info : dataset_catalog()) names += (names.empty() ? "" : ", ") + info.name;
  return names;
}

std::shared_ptr<const data::Dataset> open_dataset(const DatasetInfo& info,
                                                  const std::filesystem::path& dir,
                                                  data::Split split) {
  if (info.format == DatasetFormat::cifar_binary) {
    return std::make_shared<data::CifarDataset>(data::CifarDataset::open(dir, split));
  }
  auto idx = std::make_shared<data::IdxDataset>(data::IdxDataset::open(dir, split));
  // The models are built for the dataset's image size: other images would fail deep in the
  // forward pass (a Linear layer's input size), far from the cause.
  if (idx->rows() != info.side || idx->cols() != info.side) {
    throw data::DataError(core::str(
        dir.string(), ": the ", split == data::Split::train ? "train" : "test", " images are ",
        idx->rows(), "x", idx->cols(), " pixels, but ", info.name, "'s models take ", info.side,
        "x", info.side, " images (--dataset names the dataset, --data_dir its files)"));
  }
  // Checked here rather than at the first step, which would name neither file nor example.
  idx->check_labels(info.classes, info.name);
  return idx;
}

}  // namespace ringlet::trainer
