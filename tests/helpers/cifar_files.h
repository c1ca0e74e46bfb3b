// CIFAR-10 binary batches for tests: records with a known label and pixel pattern, and a
// directory holding the six files CifarDataset::open reads.
#pragma once

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <stdexcept>
#include <string>
#include <vector>

namespace ringlet::testing {

// `count` records of 3073 bytes: record r has label (first + r) % 10, then 3072 pixel bytes
// (red, green, blue planes of 32x32), pixel k being (first + r + k) % 251.
inline std::vector<std::uint8_t> cifar_records(int count, int first) {
  std::vector<std::uint8_t> bytes;
  for (int r = 0; r < count; ++r) {
    bytes.push_back(static_cast<std::uint8_t>((first + r) % 10));
    for (int k = 0; k < 3072; ++k) {
      bytes.push_back(static_cast<std::uint8_t>((first + r + k) % 251));
    }
  }
  return bytes;
}

// data_batch_1..5.bin with `per_batch` records each (numbered on across the batches) and
// test_batch.bin with `test_count` records, in `dir`.
inline void write_cifar_batches(const std::filesystem::path& dir, int per_batch, int test_count) {
  const auto write = [](const std::filesystem::path& path, const std::vector<std::uint8_t>& b) {
    std::ofstream out(path, std::ios::binary);
    out.write(reinterpret_cast<const char*>(b.data()), static_cast<std::streamsize>(b.size()));
    if (!out) throw std::runtime_error("cannot write " + path.string());
  };
  for (int i = 1; i <= 5; ++i) {
    write(dir / ("data_batch_" + std::to_string(i) + ".bin"),
          cifar_records(per_batch, per_batch * (i - 1)));
  }
  write(dir / "test_batch.bin", cifar_records(test_count, 100));
}

}  // namespace ringlet::testing
