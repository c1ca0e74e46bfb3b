// A checkpoint file from disk (checkpoint/): the safetensors header (length, JSON,
// dtypes, shapes, offsets, coverage), the training metadata (epoch, step, config, scaler) and
// loading into a model and its optimizer (names, shapes, dtypes, optimizer state). The model is
// a Linear(4, 2) with SGD (momentum 0.9), the one the seed corpus saves.
#include <cstdint>

#include "checkpoint/checkpoint.h"
#include "checkpoint/safetensors.h"
#include "core/error.h"
#include "nn/linear.h"
#include "nn/sgd.h"
#include "tensor/generator.h"
#include "tests/fuzz/fuzz_support.h"

namespace {

using namespace ringlet;

void read_file(const std::string& path, std::size_t size) {
  try {
    const checkpoint::safetensors::File file = checkpoint::safetensors::read(path);
    std::size_t bytes = 0;
    for (const auto& [name, t] : file.tensors) {
      FUZZ_CHECK(!name.empty() && t.is_contiguous());
      bytes += static_cast<std::size_t>(t.numel()) * core::dtype_size(t.dtype());
    }
    FUZZ_CHECK(bytes <= size);
  } catch (const core::Error&) {
  }
}

void load(const std::string& path) {
  try {
    const checkpoint::CheckpointInfo info = checkpoint::read_checkpoint_info(path);
    FUZZ_CHECK(info.epoch >= 0 && info.step >= 0);
  } catch (const core::Error&) {
  }
  // Made for each input, so that a finding replays from its file alone.
  tensor::Generator gen{3};
  nn::Linear model{4, 2, gen};
  nn::SGD optimizer{model.parameters(), {.lr = 0.1, .momentum = 0.9}};
  try {
    const checkpoint::CheckpointInfo info = checkpoint::load_checkpoint(path, model, &optimizer);
    FUZZ_CHECK(info.epoch >= 0 && info.step >= 0);
    FUZZ_CHECK(model.weight().numel() == 8 && model.bias().numel() == 2);
  } catch (const core::Error&) {
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  static fuzz::MemoryFile file("checkpoint.safetensors");
  const std::string& path = file.write(fuzz::as_text(data, size));
  read_file(path, size);
  load(path);
  return 0;
}
