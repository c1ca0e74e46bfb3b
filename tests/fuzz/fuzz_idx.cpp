// MNIST-style IDX files, raw or gzip (data/idx_dataset.h): the header's magic and
// dimensions, the counts of the images and labels files, and gzip streams, which stop as soon
// as they inflate past what the header announces. Input: the images file's length (u32, little
// endian), the images file, then the labels file.
#include <algorithm>
#include <cstdint>
#include <cstring>

#include "core/error.h"
#include "data/idx_dataset.h"
#include "tests/fuzz/fuzz_support.h"

using namespace ringlet;

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  static fuzz::MemoryFile images("images-idx3-ubyte"), labels("labels-idx1-ubyte");
  if (size < 4) return 0;
  std::uint32_t split = 0;
  std::memcpy(&split, data, 4);
  const std::string_view rest = fuzz::as_text(data + 4, size - 4);
  const std::size_t at = std::min<std::size_t>(split, rest.size());
  images.write(rest.substr(0, at));
  labels.write(rest.substr(at));

  // read_data_file alone: the output never exceeds the limit given.
  try {
    const auto bytes = data::read_data_file(images.path(), {.most = 1 << 16});
    FUZZ_CHECK(bytes.size() <= (1 << 16));
  } catch (const core::Error&) {
  }
  try {
    const data::IdxDataset dataset(images.path(), labels.path());
    FUZZ_CHECK(dataset.size() > 0);
    FUZZ_CHECK(static_cast<std::size_t>(dataset.size()) == dataset.labels().size());
    FUZZ_CHECK(dataset.rows() > 0 && dataset.cols() > 0);
    FUZZ_CHECK(static_cast<std::size_t>(dataset.size() * dataset.rows() * dataset.cols()) <=
               (std::size_t{1} << 30));
    for (const std::int64_t i : {std::int64_t{0}, dataset.size() - 1}) {
      const data::Example example = dataset.get(i);
      FUZZ_CHECK(example.image.numel() == dataset.rows() * dataset.cols());
    }
  } catch (const core::Error&) {
  }
  return 0;
}
