// `ringlet eval` through the binary: a checkpoint of a short run on real Fashion-MNIST is
// evaluated with the loss, the accuracy and the accuracy per class; --tta flip reports the
// single-view accuracy next to its own; 2 local ranks and the emulated device give the single
// process's counts; --data_dir / --data-dir and --limit_test apply; options eval does not take,
// a missing checkpoint and a file that is none are errors that say so.
#include <doctest/doctest.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <regex>
#include <sstream>
#include <string>
#include <vector>

#include "checkpoint/safetensors.h"
#include "ringlet_command.h"
#include "temp_dir.h"
#include "trainer/train.h"

using namespace ringlet;
using ringlet::testing::CommandResult;
using ringlet::testing::contains;
namespace fs = std::filesystem;

namespace {

CommandResult ringlet_eval(const std::string& args) {
  return ringlet::testing::finish_command(ringlet::testing::start_command(
      "timeout 120 '" + ringlet::testing::require_ringlet_binary() + "' eval " + args));
}

// What `ringlet eval` printed: its accuracy, the single-view accuracy after "tta flip," (or -1)
// and each class's "(right/examples)".
struct Report {
  double accuracy = -1, single_view = -1;
  std::int64_t examples = -1;
  std::vector<std::pair<std::int64_t, std::int64_t>> classes;
};

Report parse_report(const std::string& output) {
  Report r;
  std::smatch m;
  const std::regex head(
      R"(test accuracy ([0-9.]+) \((\d+) examples(; tta flip, ([0-9.]+) without)?)");
  REQUIRE_MESSAGE(std::regex_search(output, m, head), output);
  r.accuracy = std::stod(m[1]);
  r.examples = std::stoll(m[2]);
  if (m[4].matched) r.single_view = std::stod(m[4]);
  const std::regex per_class(R"(\n(?:\[rank 0\] )? +\d+ .{12} [0-9.]+ \((\d+)/(\d+)\))");
  for (auto it = std::sregex_iterator(output.begin(), output.end(), per_class);
       it != std::sregex_iterator(); ++it) {
    r.classes.emplace_back(std::stoll((*it)[1]), std::stoll((*it)[2]));
  }
  return r;
}

// A 1-epoch run on 1,024 images with flips, evaluated on 300 test images.
fs::path train_checkpoint(const fs::path& out) {
  trainer::TrainConfig c;
  c.limit_train = 1024;
  c.limit_test = 300;
  c.epochs = 1;
  c.threads = 1;
  c.augment = "flip";
  c.tta = "flip";
  c.out = out.string();
  c.log_every = 1000;
  std::ostringstream log;
  const trainer::TrainResult result = trainer::train(c, log);
  INFO(log.str());
  REQUIRE(result.epochs_done == 1);
  CHECK(result.last_eval.examples == 300);
  std::ifstream metrics(out / "metrics.jsonl");
  const auto record = nlohmann::json::parse(metrics);
  // Training's evaluation reports both accuracies too.
  CHECK(record.at("accuracy") == result.last_eval.accuracy);
  CHECK(record.at("accuracy_without_tta") == result.last_eval.single_view_accuracy);
  CHECK(contains(log.str(), "(tta flip; "));
  return out / "checkpoint.safetensors";
}

}  // namespace

TEST_CASE("ringlet eval: loss, accuracy and per class; tta; ranks, devices and data options") {
  ringlet::testing::TempDir dir("ringlet_eval");
  const fs::path checkpoint = train_checkpoint(dir.path / "run");
  const std::string ckpt = "--checkpoint '" + checkpoint.string() + "' --limit_test 300";

  const CommandResult plain = ringlet_eval(ckpt + " --tta none");
  INFO(plain.output);
  REQUIRE(plain.status == 0);
  const Report single = parse_report(plain.output);
  CHECK(single.examples == 300);
  CHECK(single.single_view == -1);
  CHECK(single.accuracy > 0.5);  // chance is 0.1
  CHECK(contains(plain.output, "T-shirt/top"));
  CHECK(contains(plain.output, "Ankle boot"));
  REQUIRE(single.classes.size() == 10);
  std::int64_t right = 0, seen = 0;
  for (const auto& [r, n] : single.classes) {
    CHECK(r <= n);
    right += r;
    seen += n;
  }
  CHECK(seen == 300);
  CHECK(static_cast<double>(right) / 300 == doctest::Approx(single.accuracy).epsilon(1e-4));

  SUBCASE("the run's tta (flip) by default: the single view is the plain evaluation") {
    const CommandResult tta = ringlet_eval(ckpt);
    INFO(tta.output);
    REQUIRE(tta.status == 0);
    const Report mirrored = parse_report(tta.output);
    CHECK(mirrored.single_view == single.accuracy);
    CHECK(mirrored.examples == 300);
  }
  SUBCASE("2 local ranks and the emulated device count what one CPU process counts") {
    for (const char* extra : {"--nproc 2", "--device emu", "--nproc 2 --device emu"}) {
      const CommandResult other = ringlet_eval(ckpt + " --tta none " + std::string(extra));
      INFO(extra, "\n", other.output);
      REQUIRE(other.status == 0);
      const Report r = parse_report(other.output);
      CHECK(r.examples == 300);
      CHECK(r.accuracy == single.accuracy);
      CHECK(r.classes == single.classes);
    }
  }
  SUBCASE("one CPU rank over the whole test split by default, however the run trained") {
    // The same checkpoint, as if a 2-rank run on cuda with limit_test 300 had written it.
    checkpoint::safetensors::File file = checkpoint::safetensors::read(checkpoint);
    auto config = nlohmann::json::parse(file.metadata.at("config"));
    config["nproc"] = 2;
    config["device"] = "cuda";
    config["limit_test"] = 300;
    file.metadata["config"] = config.dump();
    const fs::path cuda_run = dir.path / "cuda.safetensors";
    checkpoint::safetensors::write(cuda_run, file.tensors, file.metadata);
    const CommandResult whole = ringlet_eval("--checkpoint '" + cuda_run.string() + "' --tta none");
    INFO(whole.output);
    REQUIRE(whole.status == 0);
    CHECK(contains(whole.output, "on 1 rank(s), device cpu, all fashion-mnist test examples"));
    CHECK_FALSE(contains(whole.output, "[rank "));
    CHECK(parse_report(whole.output).examples == 10000);
  }
  SUBCASE("--limit_test, and --data-dir spelled either way") {
    const CommandResult fewer =
        ringlet_eval("--checkpoint '" + checkpoint.string() +
                     "' --limit_test 50 --data-dir /usr/share/datasets/fashion-mnist --tta none");
    INFO(fewer.output);
    REQUIRE(fewer.status == 0);
    CHECK(parse_report(fewer.output).examples == 50);
    const CommandResult missing = ringlet_eval(ckpt + " --data_dir '" + dir.path.string() + "'");
    CHECK(missing.status == 1);
    CHECK(contains(missing.output, dir.path.string()));
  }
  SUBCASE("weights holding NaN are refused naming the tensor; a flipped data byte is caught") {
    checkpoint::safetensors::File file = checkpoint::safetensors::read(checkpoint);
    std::string poisoned;
    for (auto& [name, t] : file.tensors) {
      if (name.rfind("model.", 0) == 0 && t.dim() == 2 && t.dtype() == core::DType::f32) {
        for (int i = 0; i < 16; ++i) t.data<float>()[i * 7] = std::nanf("");
        poisoned = name.substr(6);
        break;
      }
    }
    REQUIRE_FALSE(poisoned.empty());
    const fs::path nan_run = dir.path / "nan.safetensors";
    checkpoint::safetensors::write(nan_run, file.tensors, file.metadata);
    const CommandResult nan = ringlet_eval("--checkpoint '" + nan_run.string() + "'");
    INFO(nan.output);
    CHECK(nan.status == 1);
    CHECK(contains(nan.output, "holds NaN or infinite values in " + poisoned));
    CHECK_FALSE(contains(nan.output, "test accuracy"));

    std::ifstream in(checkpoint, std::ios::binary);
    std::string bytes{std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
    bytes[bytes.size() - 3] ^= 0x01;  // a low bit of the last tensor: the value stays finite
    const fs::path flipped = dir.path / "flipped.safetensors";
    std::ofstream(flipped, std::ios::binary) << bytes;
    const CommandResult damaged = ringlet_eval("--checkpoint '" + flipped.string() + "'");
    INFO(damaged.output);
    CHECK(damaged.status == 1);
    CHECK(contains(damaged.output, "fails its CRC-32 check"));
  }
  SUBCASE("what eval does not take, no checkpoint, and a file that is none") {
    const CommandResult lr = ringlet_eval(ckpt + " --lr 0.1");
    CHECK(lr.status == 2);
    CHECK(contains(lr.output, "eval: unknown option '--lr'"));
    const CommandResult tta = ringlet_eval(ckpt + " --tta mirror");
    CHECK(tta.status == 2);
    CHECK(contains(tta.output, "tta must be none or flip, got 'mirror'"));
    const CommandResult none = ringlet_eval("--nproc 2");
    CHECK(none.status == 2);
    CHECK(contains(none.output, "--checkpoint FILE is required"));
    const fs::path junk = dir.path / "junk.safetensors";
    std::ofstream(junk) << "not a checkpoint";
    const CommandResult bad = ringlet_eval("--checkpoint '" + junk.string() + "'");
    CHECK(bad.status == 1);
    CHECK(contains(bad.output, junk.string()));
  }
}
