// A training config as a user writes it (trainer/config.h): a JSON file (comments allowed)
// and then command-line overrides. Input: the file, then the arguments, separated by NUL
// bytes. A config that is accepted and valid survives a round trip through its JSON.
#include <cstdint>
#include <string>
#include <vector>

#include "core/error.h"
#include "tests/fuzz/fuzz_support.h"
#include "trainer/config.h"

using namespace ringlet;

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  static fuzz::MemoryFile file("config.json");
  const auto parts = fuzz::split(fuzz::as_text(data, size), '\0', 16);
  file.write(parts[0]);
  const std::vector<std::string> args(parts.begin() + 1, parts.end());
  trainer::TrainConfig config;
  try {
    config = trainer::load_config(file.path());
    config.apply_overrides(args);
    config.validate();
  } catch (const core::Error&) {
    return 0;
  }
  FUZZ_CHECK(config.epochs >= 1 && config.batch_size >= 1 && config.lr > 0);
  trainer::TrainConfig again;
  again.merge_json(config.to_json(), "the round trip");
  FUZZ_CHECK(again.to_json() == config.to_json());
  return 0;
}
