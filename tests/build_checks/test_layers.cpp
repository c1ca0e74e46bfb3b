// The build enforces DESIGN.md's layering: scripts/check_layers.sh (run for every library)
// must accept an allowed include and reject one that goes up a layer, naming the file.
#include <doctest/doctest.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>

#include "temp_dir.h"

namespace fs = std::filesystem;

namespace {

struct Result {
  int status;
  std::string output;
};

Result run(const std::string& command) {
  Result result{0, ""};
  FILE* pipe = ::popen((command + " 2>&1").c_str(), "r");
  REQUIRE(pipe != nullptr);
  char buffer[512];
  while (std::fgets(buffer, sizeof buffer, pipe) != nullptr) result.output += buffer;
  result.status = ::pclose(pipe);
  return result;
}

void write(const fs::path& path, const std::string& text) {
  fs::create_directories(path.parent_path());
  std::ofstream(path) << text;
}

}  // namespace

TEST_CASE("an include that goes up a layer fails the layer check") {
  const fs::path root = ringlet::testing::process_temp_path("ringlet_layer_test");
  fs::remove_all(root);
  write(root / "tensor/ok.cpp", "#include \"core/error.h\"\n");
  write(root / "core/bad.cpp", "#include \"tensor/tensor.h\"\n");
  write(root / "collectives/bad.h", "#include <ringlet/tensor/tensor.h>\n");
  const std::string script = std::string(RINGLET_SOURCE_ROOT) + "/scripts/check_layers.sh";
  const std::string stamp = (root / "stamp.h").string();

  const Result ok = run(script + " " + root.string() + " tensor " + stamp);
  CHECK(ok.status == 0);
  CHECK(fs::exists(stamp));

  const Result core = run(script + " " + root.string() + " core " + stamp);
  CHECK(core.status != 0);
  CHECK(core.output.find("core/bad.cpp") != std::string::npos);
  CHECK(core.output.find("includes tensor/") != std::string::npos);

  const Result coll = run(script + " " + root.string() + " collectives " + stamp);
  CHECK(coll.status != 0);
  CHECK(coll.output.find("collectives/bad.h") != std::string::npos);
  fs::remove_all(root);
}

TEST_CASE("the project's own tree follows the layering") {
  const std::string script = std::string(RINGLET_SOURCE_ROOT) + "/scripts/check_layers.sh";
  for (const char* layer : {"core", "transport", "device", "collectives", "tensor", "nn", "data",
                            "checkpoint", "distributed", "trainer"}) {
    const Result r = run(script + " " RINGLET_SOURCE_ROOT " " + layer + " /dev/null");
    INFO(layer, ": ", r.output);
    CHECK(r.status == 0);
  }
}
