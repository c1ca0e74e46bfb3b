// A CIFAR-10 binary batch (data/cifar_dataset.h): 3073-byte records of a label (0-9)
// and 3x32x32 pixels; anything else is refused naming the file.
#include <cstdint>

#include "core/error.h"
#include "data/cifar_dataset.h"
#include "tests/fuzz/fuzz_support.h"

using namespace ringlet;

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  static fuzz::MemoryFile file("data_batch_1.bin");
  file.write(fuzz::as_text(data, size));
  try {
    const data::CifarDataset dataset({file.path()});
    FUZZ_CHECK(dataset.size() > 0);
    FUZZ_CHECK(static_cast<std::size_t>(dataset.size() * data::CifarDataset::kRecordBytes) == size);
    for (const std::uint8_t label : dataset.labels()) FUZZ_CHECK(label < 10);
    const data::Example last = dataset.get(dataset.size() - 1);
    FUZZ_CHECK(last.image.numel() == 3 * 32 * 32 && last.label < 10);
  } catch (const core::Error&) {
  }
  return 0;
}
