// Environment values a launcher sets (transport/discovery.h, core/env.h): torchrun's, Slurm's
// and Open MPI's variables, an init_method URL, Slurm node lists and integer settings. Input:
// NUL-separated parts: the init_method, then NAME=VALUE entries. A discovery that succeeds
// describes a consistent job.
#include <cstdint>
#include <map>
#include <optional>
#include <string>

#include "core/env.h"
#include "core/error.h"
#include "tests/fuzz/fuzz_support.h"
#include "transport/discovery.h"

using namespace ringlet;

namespace {

void discover(const std::string& init_method, const std::map<std::string, std::string>& env) {
  transport::InitOptions options;
  options.init_method = init_method;
  const auto lookup = [&env](const std::string& name) -> std::optional<std::string> {
    const auto it = env.find(name);
    if (it == env.end()) return std::nullopt;
    return it->second;
  };
  try {
    const transport::InitInfo info = transport::discover(options, lookup);
    FUZZ_CHECK(info.world_size >= 1 && info.rank >= 0 && info.rank < info.world_size);
    FUZZ_CHECK(info.local_world_size >= 1 && info.local_rank >= 0 &&
               info.local_rank < info.local_world_size);
    if (info.source != "file") FUZZ_CHECK(info.master_port >= 0 && info.master_port <= 65535);
  } catch (const core::Error&) {
  }
}

void parse_int(const std::string& text) {
  try {
    const std::int64_t value = core::parse_int(text, "fuzz");
    FUZZ_CHECK(core::parse_int(std::to_string(value), "fuzz") == value);
  } catch (const core::Error&) {
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const auto parts = fuzz::split(fuzz::as_text(data, size), '\0', 24);
  std::map<std::string, std::string> env;
  for (std::size_t i = 1; i < parts.size(); ++i) {
    const auto eq = parts[i].find('=');
    if (eq == std::string_view::npos) continue;
    const std::string value(parts[i].substr(eq + 1));
    env[std::string(parts[i].substr(0, eq))] = value;
    parse_int(value);
    try {
      FUZZ_CHECK(!transport::slurm_first_host(value).empty());
    } catch (const core::Error&) {
    }
  }
  discover(std::string(parts[0]), env);
  return 0;
}
