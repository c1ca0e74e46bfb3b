// CIFAR-10 loading: validate every file's size and labels first, then copy the pixel planes
// of all records into one u8 tensor [N, 3, 32, 32] that every Example views (the record
// layout is already channel-major, so each record is one contiguous copy).
#include "data/cifar_dataset.h"

#include <cstring>
#include <string>

namespace ringlet::data {

namespace fs = std::filesystem;

CifarDataset CifarDataset::open(const fs::path& dir, Split split) {
  std::vector<fs::path> files;
  if (split == Split::train) {
    for (int i = 1; i <= 5; ++i)
      files.push_back(dir / ("data_batch_" + std::to_string(i) + ".bin"));
  } else {
    files.push_back(dir / "test_batch.bin");
  }
  return CifarDataset(files);
}

CifarDataset::CifarDataset(const std::vector<fs::path>& files) {
  if (files.empty()) throw DataError("CifarDataset: no files given");
  // Read and check everything before allocating the combined tensor.
  std::vector<std::vector<std::uint8_t>> contents;
  contents.reserve(files.size());
  for (const auto& file : files) {
    // The 60,000 images of CIFAR-10 at most (a batch file holds 10,000).
    SizeLimit limit;
    limit.most = 60000 * static_cast<std::uint64_t>(kRecordBytes);
    std::vector<std::uint8_t> bytes = read_data_file(file, limit);
    const auto n = static_cast<std::int64_t>(bytes.size());
    if (n == 0 || n % kRecordBytes != 0) {
      throw DataError(file.string() + ": " + std::to_string(n) +
                      " bytes is not a positive multiple of the CIFAR-10 record size (" +
                      std::to_string(kRecordBytes) + " bytes: 1 label + 3x32x32 pixels)");
    }
    for (std::int64_t r = 0; r < n / kRecordBytes; ++r) {
      const std::uint8_t label = bytes[static_cast<std::size_t>(r * kRecordBytes)];
      if (label >= kClasses) {
        throw DataError(file.string() + ": record " + std::to_string(r) + " has label " +
                        std::to_string(label) + ", expected 0..9");
      }
    }
    count_ += n / kRecordBytes;
    contents.push_back(std::move(bytes));
  }
  constexpr std::int64_t kPixels = kRecordBytes - 1;
  images_ = tensor::Tensor::empty({count_, kChannels, kSide, kSide}, core::DType::u8);
  labels_.reserve(static_cast<std::size_t>(count_));
  auto* out = static_cast<std::uint8_t*>(images_.raw_data());
  for (auto& bytes : contents) {
    for (std::size_t at = 0; at < bytes.size(); at += kRecordBytes) {
      labels_.push_back(bytes[at]);
      std::memcpy(out, bytes.data() + at + 1, kPixels);
      out += kPixels;
    }
    bytes = {};  // release each file as soon as it is copied
  }
}

Example CifarDataset::get(std::int64_t index) const {
  RINGLET_CHECK(index >= 0 && index < count_, ValueError, "CifarDataset::get(", index,
                "): index out of range for ", count_, " examples");
  constexpr std::int64_t kPlane = kSide * kSide;
  return {
      tensor::Tensor::make_view(images_.storage(), {kChannels, kSide, kSide}, {kPlane, kSide, 1},
                                images_.offset() + index * kChannels * kPlane, core::DType::u8),
      labels_[static_cast<std::size_t>(index)]};
}

}  // namespace ringlet::data
