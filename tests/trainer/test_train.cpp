// The training loop on real Fashion-MNIST (the default dataset, installed by
// scripts/install-deps.sh): a short run learns far above chance, a resumed run ends with
// bitwise the same parameters as an uninterrupted one, and a checkpoint evaluates. CIFAR-10
// runs on generated batches (3 channels, the dataset's per-channel normalization), also as the
// recipes in recipes/ run them through the `ringlet` binary, with overrides on top.
#include <doctest/doctest.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <regex>
#include <sstream>
#include <vector>

#include "checkpoint/safetensors.h"
#include "cifar_files.h"
#include "data/data_loader.h"
#include "nn/flatten.h"
#include "nn/linear.h"
#include "nn/sequential.h"
#include "ringlet_command.h"
#include "same_checkpoint.h"
#include "temp_dir.h"
#include "trainer/cli/usage.h"
#include "trainer/train.h"

using namespace ringlet;
using ringlet::testing::CommandResult;
using ringlet::testing::contains;
namespace fs = std::filesystem;

namespace {

trainer::TrainConfig small_run(const fs::path& out) {
  trainer::TrainConfig c;
  c.limit_train = 512;
  c.limit_test = 200;
  c.threads = 1;  // one thread: the summation order, and so every bit, is fixed
  c.workers = 2;
  c.out = out.string();
  c.log_every = 1000;
  return c;
}

// `ringlet eval`'s evaluation of a checkpoint with the config it was trained with.
trainer::EvalResult evaluate_saved(const fs::path& checkpoint) {
  return trainer::evaluate_checkpoint(checkpoint.string(),
                                      trainer::checkpoint_config(checkpoint.string()));
}

}  // namespace

namespace {

// Three 1x1x2 images (a, b) with labels; with weights [[1, 0], [0, 2]] an image's logits are
// (a, 2b) and its mirror's (b, 2a).
class PairDataset : public data::Dataset {
 public:
  std::int64_t size() const override { return 3; }
  data::Example get(std::int64_t index) const override {
    static const float pixels[3][2] = {{3, 1}, {-1, 0}, {0, 2}};
    static const std::int64_t labels[3] = {1, 0, 1};
    tensor::Tensor image = tensor::Tensor::empty({1, 1, 2}, core::DType::f32);
    image.data<float>()[0] = pixels[index][0];
    image.data<float>()[1] = pixels[index][1];
    return {image, labels[index]};
  }
};

}  // namespace

TEST_CASE("tta flip by hand: the mean of an image's and its mirror's logits decides") {
  tensor::Generator gen(0);
  auto linear = std::make_shared<nn::Linear>(2, 2, gen, false);
  const float weight[4] = {1, 0, 0, 2};
  std::copy(weight, weight + 4, linear->weight().data<float>());
  nn::Sequential model({std::make_shared<nn::Flatten>(), linear});
  data::DataLoaderOptions options;
  options.batch_size = 2;  // two batches: the tally adds up across them
  data::DataLoader loader(std::make_shared<PairDataset>(), options);
  // Image logits (3, 2), (-1, 0), (0, 4): only the third is right. Means with the mirror:
  // (2, 4), (-0.5, -1), (1, 2): all three right.
  const trainer::EvalResult single = trainer::evaluate(model, loader, {.classes = 2});
  CHECK(single.accuracy == doctest::Approx(1.0 / 3));
  CHECK(single.single_view_accuracy == single.accuracy);
  CHECK(single.loss == doctest::Approx(0.8815577676514185));
  const trainer::EvalResult tta = trainer::evaluate(model, loader, {.mirror = true, .classes = 2});
  CHECK(tta.accuracy == 1.0);
  CHECK(tta.single_view_accuracy == doctest::Approx(1.0 / 3));
  CHECK(tta.loss == doctest::Approx(0.30475556091376715));  // cross-entropy of the means
  CHECK(tta.class_examples == std::vector<std::int64_t>{1, 2});
  CHECK(tta.class_correct == std::vector<std::int64_t>{1, 2});
  CHECK(single.class_correct == std::vector<std::int64_t>{0, 1});
  CHECK_THROWS_WITH_AS(trainer::evaluate(model, loader, {}),
                       doctest::Contains("EvalOptions::classes must be"), core::ValueError);
}

TEST_CASE("a short run on 2,000 real images learns") {
  const fs::path dir = ringlet::testing::process_temp_path("ringlet_train_learns");
  fs::remove_all(dir);
  trainer::TrainConfig c = small_run(dir);
  c.limit_train = 2000;
  c.limit_test = 1000;
  c.epochs = 1;
  std::ostringstream log;
  const auto result = trainer::train(c, log);
  INFO(log.str());
  CHECK(result.epochs_done == 1);
  CHECK(result.last_eval.examples == 1000);
  CHECK(result.last_eval.accuracy > 0.5);  // chance is 0.1
  CHECK(fs::exists(dir / "metrics.jsonl"));
  CHECK(fs::exists(dir / "config.json"));
  const auto again = evaluate_saved(dir / "checkpoint.safetensors");
  CHECK(again.accuracy == result.last_eval.accuracy);
  fs::remove_all(dir);
}

TEST_CASE("--cuda_graph on: the captured and replayed step trains bit for bit as the eager one") {
  const fs::path dir = ringlet::testing::process_temp_path("ringlet_train_graph");
  trainer::TrainConfig c = small_run(dir);
  c.device = "emu";
  c.limit_train = 704;  // 11 steps an epoch: 3 warm-up, the capture, replays, a short last batch
  c.deterministic = "off";  // the fast path, as on a GPU
  c.limit_test = 128;
  c.epochs = 2;
  std::map<std::string, trainer::TrainResult> runs;
  std::map<std::string, std::string> logs;
  for (const std::string mode : {"on", "off"}) {
    fs::remove_all(dir);
    c.cuda_graph = mode;
    std::ostringstream log;
    runs[mode] = trainer::train(c, log);
    logs[mode] = log.str();
    fs::copy_file(dir / "checkpoint.safetensors", dir.string() + "." + mode + ".safetensors",
                  fs::copy_options::overwrite_existing);
  }
  INFO(logs["on"]);
  CHECK(contains(logs["on"], "cuda_graph: the step is captured after 3 eager steps"));
  CHECK_FALSE(contains(logs["off"], "cuda_graph:"));
  CHECK(runs["on"].last_eval.loss == runs["off"].last_eval.loss);
  CHECK(runs["on"].last_eval.accuracy == runs["off"].last_eval.accuracy);
  ringlet::testing::check_same_tensors(
      checkpoint::safetensors::read(dir.string() + ".on.safetensors"),
      checkpoint::safetensors::read(dir.string() + ".off.safetensors"));
  // What a captured step cannot hold is refused before the run directory is touched.
  const auto refused = [&](trainer::TrainConfig bad, const std::string& why) {
    fs::remove_all(dir);
    bad.cuda_graph = "on";
    std::ostringstream log;
    CHECK_THROWS_WITH_AS(trainer::train(bad, log), doctest::Contains(why.c_str()),
                         trainer::cli::UsageError);
    CHECK_FALSE(fs::exists(dir / "config.json"));
  };
  trainer::TrainConfig adam = c;
  adam.optimizer = "adam";
  adam.lr = 1e-3;
  refused(adam, "adam's bias corrections follow the host's step count");
  trainer::TrainConfig clipped = c;
  clipped.clip_grad_norm = 1.0;
  refused(clipped, "clipping reads the gradients' norm on the host every step");
  trainer::TrainConfig host = c;
  host.device = "cpu";
  refused(host, "a graph captures a device's work");
  fs::remove_all(dir);
  for (const std::string mode : {"on", "off"})
    fs::remove(dir.string() + "." + mode + ".safetensors");
}

TEST_CASE("--device emu trains like the CPU: the same run on the emulated GPU, bit for bit") {
  const fs::path dir = ringlet::testing::process_temp_path("ringlet_train_emu");
  fs::remove_all(dir);
  trainer::TrainConfig c = small_run(dir);
  // The default recipe's 3 epochs on 1,000 images (the full run is the README's command).
  c.limit_train = 1000;
  c.limit_test = 500;
  c.epochs = 3;
  std::ostringstream cpu_log, emu_log;
  const auto on_cpu = trainer::train(c, cpu_log);
  fs::remove_all(dir);
  c.device = "emu";
  // deterministic auto: on for the emulated device, the CPU's decomposition of every op
  const auto on_emu = trainer::train(c, emu_log);
  INFO(emu_log.str());
  CHECK(emu_log.str().find("device: emu:0") != std::string::npos);
  CHECK(on_emu.epochs_done == 3);
  CHECK(on_emu.last_eval.examples == 500);
  CHECK(on_emu.last_eval.accuracy > 0.5);
  // Deterministic, the emulated device runs the CPU's arithmetic (the same GEMM decomposition,
  // batch norm and reductions' order where it matters), so the run is the CPU's, bit for bit.
  CHECK(on_emu.last_eval.accuracy == on_cpu.last_eval.accuracy);
  CHECK(on_emu.last_eval.loss == on_cpu.last_eval.loss);
  // The checkpoint holds host tensors: evaluating it on the CPU gives the same accuracy.
  const auto again = evaluate_saved(dir / "checkpoint.safetensors");
  CHECK(again.accuracy == on_emu.last_eval.accuracy);
  fs::remove_all(dir);
  c.device = "emu:7";
  CHECK_THROWS_WITH_AS(c.validate(), doctest::Contains("emu:7 does not exist"),
                       trainer::cli::UsageError);
  c.device = "emu";
  c.nproc = 2;
  CHECK_NOTHROW(c.validate());  // DDP on devices
  c.sync_bn = true;
  CHECK_NOTHROW(c.validate());  // SyncBatchNorm on devices
}

TEST_CASE("mixed precision: f16 with loss scaling and bf16 runs learn") {
  for (const char* precision : {"f16", "bf16"}) {
    CAPTURE(std::string(precision));
    const fs::path dir = ringlet::testing::process_temp_path("ringlet_train_amp");
    fs::remove_all(dir);
    trainer::TrainConfig c = small_run(dir);
    c.limit_train = 2000;
    c.limit_test = 500;
    c.epochs = 1;
    c.precision = precision;
    std::ostringstream log;
    const auto result = trainer::train(c, log);
    INFO(log.str());
    CHECK(log.str().find(std::string("mixed precision: ") + precision) != std::string::npos);
    CHECK(result.last_eval.accuracy > 0.5);  // chance is 0.1
    std::ifstream metrics(dir / "metrics.jsonl");
    const auto record = nlohmann::json::parse(metrics);
    if (std::string(precision) == "f16") {
      // Each skipped step halved the scale from 2^16 (no growth within 2000 clean steps).
      CHECK(record.at("loss_scale").get<double>() ==
            65536.0 / std::pow(2.0, static_cast<double>(result.skipped_steps)));
      CHECK(record.at("skipped_steps").get<std::int64_t>() == result.skipped_steps);
    } else {
      CHECK_FALSE(record.contains("loss_scale"));
      CHECK(result.skipped_steps == 0);
    }
    fs::remove_all(dir);
  }
  trainer::TrainConfig bad;
  bad.precision = "fp8";
  CHECK_THROWS_WITH(bad.validate(), doctest::Contains("precision must be f32, bf16 or f16"));
}

TEST_CASE("resume continues exactly where the run stopped (f32; f16 with its loss scale)") {
  for (const char* precision : {"f32", "f16"}) {
    CAPTURE(std::string(precision));
    const fs::path whole = ringlet::testing::process_temp_path("ringlet_train_whole");
    const fs::path split = ringlet::testing::process_temp_path("ringlet_train_split");
    fs::remove_all(whole);
    fs::remove_all(split);
    std::ostringstream log;
    trainer::TrainConfig a = small_run(whole);
    a.epochs = 2;
    a.precision = precision;
    trainer::train(a, log);
    trainer::TrainConfig b = small_run(split);
    b.epochs = 1;
    b.precision = precision;
    trainer::train(b, log);
    b.epochs = 2;
    b.resume = true;
    trainer::train(b, log);
    const auto ca = checkpoint::safetensors::read(whole / "checkpoint.safetensors");
    const auto cb = checkpoint::safetensors::read(split / "checkpoint.safetensors");
    ringlet::testing::check_same_tensors(ca, cb);
    CHECK(ca.metadata.at("step") == cb.metadata.at("step"));
    // f16 runs keep their loss scale and growth count across the restart.
    CHECK(ca.metadata.count("scaler.scale") == (std::string(precision) == "f16" ? 1 : 0));
    if (ca.metadata.count("scaler.scale") != 0) {
      CHECK(ca.metadata.at("scaler.scale") == cb.metadata.at("scaler.scale"));
      CHECK(ca.metadata.at("scaler._growth_tracker") == cb.metadata.at("scaler._growth_tracker"));
    }
    fs::remove_all(whole);
    fs::remove_all(split);
  }
  std::ostringstream log;
  trainer::TrainConfig missing =
      small_run(ringlet::testing::process_temp_path("ringlet_train_none"));
  missing.resume = true;
  CHECK_THROWS_WITH_AS(trainer::train(missing, log), doctest::Contains("does not exist"),
                       core::ValueError);
}

TEST_CASE("divergence: a NaN loss stops the run; a checkpoint holding NaN weights is not resumed") {
  ringlet::testing::TempDir out("ringlet_train_diverge");
  std::ostringstream log;
  trainer::TrainConfig c = small_run(out.path);
  c.epochs = 1;
  trainer::TrainConfig wild = c;
  wild.lr = 1e30;
  CHECK_THROWS_WITH_AS(trainer::train(wild, log), doctest::Contains("diverged"), core::Error);
  c.reset = true;
  trainer::train(c, log);
  // One weight of the finished run's checkpoint becomes NaN.
  const fs::path ckpt = out.path / "checkpoint.safetensors";
  auto file = checkpoint::safetensors::read(ckpt);
  std::string poisoned;
  for (auto& [name, t] : file.tensors) {
    if (name.rfind("model.", 0) == 0 && t.dtype() == tensor::DType::f32) {
      t.data<float>()[0] = std::nanf("");
      poisoned = name.substr(6);
      break;
    }
  }
  REQUIRE_FALSE(poisoned.empty());
  checkpoint::safetensors::write(ckpt, file.tensors, file.metadata);
  c.reset = false;
  c.resume = true;
  c.epochs = 2;
  CHECK_THROWS_WITH_AS(trainer::train(c, log),
                       doctest::Contains(("holds NaN or infinite values in " + poisoned).c_str()),
                       core::ValueError);
}

TEST_CASE("--reset starts over; warmup ramps the learning rate") {
  const fs::path dir = ringlet::testing::process_temp_path("ringlet_train_reset");
  fs::remove_all(dir);
  std::ostringstream log;
  trainer::TrainConfig c = small_run(dir);
  c.epochs = 1;
  trainer::train(c, log);
  c.reset = true;
  c.epochs = 2;
  c.schedule = "cosine";
  c.warmup_epochs = 1;
  trainer::train(c, log);
  std::ifstream metrics(dir / "metrics.jsonl");
  std::vector<nlohmann::json> lines;
  for (std::string line; std::getline(metrics, line);) lines.push_back(nlohmann::json::parse(line));
  REQUIRE(lines.size() == 2);  // the first run's line is gone
  CHECK(lines[0]["epoch"] == 1);
  CHECK(lines[0]["lr"].get<double>() == doctest::Approx(0.005));  // a tenth of lr in warmup
  CHECK(lines[1]["lr"].get<double>() == doctest::Approx(0.05));
  c.resume = true;
  CHECK_THROWS_WITH_AS(trainer::train(c, log), doctest::Contains("contradict"),
                       trainer::cli::UsageError);
  fs::remove_all(dir);
}

TEST_CASE("cifar10: a short resnet20 run on generated CIFAR-10 batches") {
  ringlet::testing::TempDir data("ringlet_cifar");
  ringlet::testing::write_cifar_batches(data.path, 60, 50);  // 300 training, 50 test images
  ringlet::testing::TempDir out("ringlet_train_cifar");
  trainer::TrainConfig c = small_run(out.path);
  c.dataset = "cifar10";
  c.data_dir = data.path.string();
  c.model = "resnet20";
  c.epochs = 1;
  c.limit_train = 256;
  c.batch_size = 32;
  std::ostringstream log;
  const auto result = trainer::train(c, log);
  INFO(log.str());
  CHECK(result.epochs_done == 1);
  CHECK(result.last_eval.examples == 50);
  std::ifstream metrics(out.path / "metrics.jsonl");
  const auto record = nlohmann::json::parse(metrics);
  CHECK(record.at("step") == 8);  // 256 images in batches of 32
  CHECK(std::isfinite(record.at("loss").get<double>()));
  CHECK(std::isfinite(record.at("test_loss").get<double>()));
  // No --mean/--std: the run used, and recorded, CIFAR-10's per-channel statistics.
  std::ifstream config(out.path / "config.json");
  const auto saved = nlohmann::json::parse(config);
  CHECK(saved.at("mean") == nlohmann::json({0.4914, 0.4822, 0.4465}));
  CHECK(saved.at("std") == nlohmann::json({0.2470, 0.2435, 0.2616}));
  const auto again = evaluate_saved(out.path / "checkpoint.safetensors");
  CHECK(again.accuracy == result.last_eval.accuracy);
}

namespace {

// `ringlet train ARGS` run to its end (a hang fails the test): exit status and output.
CommandResult ringlet_train(const std::string& args) {
  return ringlet::testing::finish_command(ringlet::testing::start_command(
      "timeout 120 '" + ringlet::testing::require_ringlet_binary() + "' train " + args));
}

nlohmann::json read_json(const fs::path& file) {
  std::ifstream in(file);
  return nlohmann::json::parse(in);
}

}  // namespace

TEST_CASE("the CIFAR-10 recipes train on generated CIFAR-10 files, overrides on top") {
  ringlet::testing::TempDir data("ringlet_recipe_cifar");
  ringlet::testing::write_cifar_batches(data.path, 20, 32);  // 100 training, 32 test images
  struct Case {
    std::string recipe, model, limits;
    double weight_decay;
    int steps;
  };
  for (const Case& run :
       {Case{"cifar10_resnet20", "resnet20", "--limit_train 64 --limit_test 32", 1e-4, 4},
        Case{"cifar10_resnet18", "resnet18", "--limit_train 32 --limit_test 16", 5e-4, 2}}) {
    CAPTURE(run.recipe);
    ringlet::testing::TempDir out("ringlet_recipe_run");
    const CommandResult result = ringlet_train(
        "--recipe " + run.recipe + " --data_dir '" + data.path.string() + "' --epochs 1 " +
        run.limits + " --batch_size 16 --nproc 1 --threads 1 --workers 1 --log_every 1000 --out '" +
        out.path.string() + "'");
    INFO(result.output);
    REQUIRE(result.status == 0);
    CHECK(ringlet::testing::contains(result.output, "recipe " + run.recipe + ": "));
    const auto record = read_json(out.path / "metrics.jsonl");
    CHECK(record.at("step") == run.steps);
    CHECK(std::isfinite(record.at("loss").get<double>()));
    CHECK(std::isfinite(record.at("test_loss").get<double>()));
    // The recipe's keys, with the command line's overrides on top.
    const auto config = read_json(out.path / "config.json");
    CHECK(config.at("model") == run.model);
    CHECK(config.at("augment") == "crop,flip");
    CHECK(config.at("crop_padding") == 4);
    CHECK(config.at("lr") == 0.1);
    CHECK(config.at("nesterov") == true);
    CHECK(config.at("weight_decay") == run.weight_decay);
    CHECK(config.at("schedule") == "cosine");
    CHECK(config.at("epochs") == 1);
    CHECK(config.at("batch_size") == 16);
  }
  // Without --data_dir the recipe cannot run, and says what it needs.
  const CommandResult result = ringlet_train("--recipe cifar10_resnet20");
  CHECK(result.status == 2);
  CHECK(ringlet::testing::contains(result.output, "dataset cifar10 needs --data_dir DIR"));
}

TEST_CASE("--cuda_graph on with 2 ranks (device flags): DDP's collectives captured, bit for bit") {
  std::map<std::string, ringlet::testing::TempDir> runs;
  std::map<std::string, std::string> logs;
  for (const std::string mode : {"on", "off"}) {
    const auto& dir = runs.try_emplace(mode, "ringlet_graph_ddp_" + mode).first->second;
    // 11 steps an epoch per rank: 3 warm-up, the capture, replays, a short last batch.
    const CommandResult result = ringlet_train(
        "--nproc 2 --device emu --deterministic off --cuda_graph " + mode +
        " --epochs 1 --limit_train 1408 --limit_test 128 --threads 1 --workers 1 --log_every 1000"
        " --seed 3 --out '" +
        dir.path.string() + "'");
    INFO(result.output);
    REQUIRE(result.status == 0);
    logs[mode] = result.output;
  }
  CHECK(contains(logs["on"], "cuda_graph: the step is captured after 3 eager steps"));
  ringlet::testing::check_same_tensors(
      checkpoint::safetensors::read(runs.at("on").path / "checkpoint.safetensors"),
      checkpoint::safetensors::read(runs.at("off").path / "checkpoint.safetensors"));
  // Without device flags the ranks' collectives are the host's: refused, saying so.
  const CommandResult refused = ringlet::testing::finish_command(ringlet::testing::start_command(
      "timeout 120 env RINGLET_DEVICE_FLAGS=0 '" + ringlet::testing::require_ringlet_binary() +
      "' train --nproc 2 --device emu --cuda_graph on --epochs 1 --limit_train 256"
      " --limit_test 64 --threads 1 --workers 1 --out '" +
      runs.at("on").path.string() + "/x'"));
  CHECK(refused.status != 0);
  CHECK(contains(refused.output, "several ranks without device flags"));
}

TEST_CASE("2 ranks over rdma (emulated device) end with tcp's parameters, bit for bit") {
  std::map<std::string, ringlet::testing::TempDir> runs;
  for (const std::string transport : {"tcp", "rdma"}) {
    CAPTURE(transport);
    const auto& dir = runs.try_emplace(transport, "ringlet_transport_" + transport).first->second;
    const CommandResult result = ringlet::testing::finish_command(ringlet::testing::start_command(
        "timeout 120 env RINGLET_TRANSPORT=" + transport + " RINGLET_IB_DEVICE=emu0 '" +
        ringlet::testing::require_ringlet_binary() +
        "' train --nproc 2 --epochs 1 --limit_train 512 --limit_test 100 --threads 1 "
        "--workers 1 --log_every 1000 --seed 3 --out '" +
        dir.path.string() + "'"));
    INFO(result.output);
    REQUIRE(result.status == 0);
    CHECK(ringlet::testing::contains(result.output, "peers: 1:" + transport));
  }
  ringlet::testing::check_same_tensors(
      checkpoint::safetensors::read(runs.at("tcp").path / "checkpoint.safetensors"),
      checkpoint::safetensors::read(runs.at("rdma").path / "checkpoint.safetensors"));
}

TEST_CASE("--comm-hook fp16_compress and bf16_compress: 2 ranks still learn, as without") {
  std::map<std::string, double> accuracy;
  for (const std::string hook : {"none", "fp16_compress", "bf16_compress"}) {
    CAPTURE(hook);
    ringlet::testing::TempDir dir("ringlet_hook");
    const CommandResult result = ringlet_train(
        "--nproc 2 --epochs 1 --limit_train 2000 --limit_test 500 --threads 1 --workers 1 "
        "--log_every 1000 --comm-hook " +
        hook + " --out '" + dir.path.string() + "'");
    INFO(result.output);
    REQUIRE(result.status == 0);
    CHECK(ringlet::testing::contains(result.output, "DDP comm hook: " + hook) == (hook != "none"));
    std::ifstream metrics(dir.path / "metrics.jsonl");
    std::string line;
    REQUIRE(std::getline(metrics, line));
    accuracy[hook] = nlohmann::json::parse(line).at("accuracy").get<double>();
  }
  CHECK(accuracy["none"] > 0.5);  // chance is 0.1
  CHECK(accuracy["fp16_compress"] == doctest::Approx(accuracy["none"]).epsilon(0.05));
  CHECK(accuracy["bf16_compress"] == doctest::Approx(accuracy["none"]).epsilon(0.05));
  const CommandResult bad = ringlet_train("--nproc 2 --comm-hook fp8");
  CHECK(bad.status == 2);
  CHECK(ringlet::testing::contains(bad.output,
                                   "comm_hook must be none, fp16_compress or bf16_compress"));
}

TEST_CASE("fmnist_best starts its 2 local ranks, which read the recipe too") {
  ringlet::testing::TempDir out("ringlet_recipe_fmnist");
  const CommandResult result = ringlet_train(
      "--recipe fmnist_best --epochs 1 --warmup_epochs 0 --limit_train 256 --limit_test 100 "
      "--workers 1 --seed 2 --out '" +
      out.path.string() + "'");
  INFO(result.output);
  REQUIRE(result.status == 0);
  CHECK(ringlet::testing::contains(result.output, "done: 1 epoch(s) on 2 ranks"));
  const auto config = read_json(out.path / "config.json");
  CHECK(config.at("nproc") == 2);
  CHECK(config.at("seed") == 2);
  CHECK(config.at("augment") == "flip");
  CHECK(config.at("label_smoothing") == 0.1);
  CHECK(config.at("crop_padding") == 2);  // the dataset's, recorded though unused without crop
  CHECK(config.at("tta") == "flip");
  CHECK(ringlet::testing::contains(result.output, "(tta flip; "));
}

namespace {

std::vector<nlohmann::json> read_lines(const fs::path& file) {
  std::vector<nlohmann::json> records;
  std::ifstream in(file);
  for (std::string line; std::getline(in, line);) records.push_back(nlohmann::json::parse(line));
  return records;
}

// The progress lines of a run's output ("[rank 0] " stripped).
std::vector<std::string> progress_lines(const std::string& output) {
  static const std::regex line(
      R"((?:\[rank 0\] )?(epoch \d+/\d+ step \d+/\d+ loss [0-9.]+ lr [0-9.]+ grad_norm [0-9.]+ \d+ img/s eta \d+:\d\d)(?: \| straggler: [^\n]*)?\n)");
  std::vector<std::string> lines;
  for (auto it = std::sregex_iterator(output.begin(), output.end(), line);
       it != std::sregex_iterator(); ++it) {
    lines.push_back((*it)[1]);
  }
  return lines;
}

// A steps.jsonl record: the fields and their sense.
void check_step_record(const nlohmann::json& r, int epoch, std::int64_t step) {
  INFO(r.dump());
  CHECK(r.at("epoch") == epoch);
  CHECK(r.at("step") == step);
  CHECK(r.at("loss").get<double>() > 0);
  CHECK(r.at("lr").get<double>() > 0);
  CHECK(r.at("grad_norm").get<double>() > 0);
  CHECK(r.at("images_per_s").get<double>() > 0);
  CHECK(r.at("eta_s").get<double>() >= 0);
}

}  // namespace

TEST_CASE("progress: every log_every steps a line and a steps.jsonl record, on 1 and 2 ranks") {
  ringlet::testing::TempDir out("ringlet_progress");
  const std::string common =
      "--limit_train 640 --limit_test 100 --batch_size 64 --log_every 4 --workers 1 ";
  SUBCASE("one process: 10 steps an epoch, windows ending at steps 4, 8 and 10") {
    const std::string run = common + "--threads 1 --out '" + out.path.string() + "'";
    const CommandResult result = ringlet_train(run + " --epochs 2");
    INFO(result.output);
    REQUIRE(result.status == 0);
    const auto lines = progress_lines(result.output);
    REQUIRE(lines.size() == 6);
    CHECK(lines[0].rfind("epoch 1/2 step 4/10 loss ", 0) == 0);
    CHECK(lines[5].rfind("epoch 2/2 step 10/10 loss ", 0) == 0);
    auto records = read_lines(out.path / "steps.jsonl");
    REQUIRE(records.size() == 6);
    const std::int64_t steps[] = {4, 8, 10, 14, 18, 20};
    for (std::size_t i = 0; i < 6; ++i) check_step_record(records[i], i < 3 ? 1 : 2, steps[i]);
    CHECK(records[5].at("eta_s").get<double>() == 0);  // nothing left
    // A record of an epoch the checkpoint does not hold (a kill mid-epoch) goes on resume.
    {
      std::ofstream stale(out.path / "steps.jsonl", std::ios::app);
      stale << R"({"epoch": 3, "step": 24, "loss": 1.0})"
            << "\n";
    }
    const CommandResult resumed = ringlet_train(run + " --epochs 3 --resume");
    INFO(resumed.output);
    REQUIRE(resumed.status == 0);
    CHECK(ringlet::testing::contains(resumed.output, "steps.jsonl: dropped 1 line(s)"));
    records = read_lines(out.path / "steps.jsonl");
    REQUIRE(records.size() == 9);
    check_step_record(records[6], 3, 24);
    check_step_record(records[8], 3, 30);
  }
  SUBCASE("2 ranks: 5 steps an epoch on each, windows ending at steps 4 and 5; rank 0 writes") {
    const CommandResult result =
        ringlet_train(common + "--nproc 2 --epochs 1 --out '" + out.path.string() + "'");
    INFO(result.output);
    REQUIRE(result.status == 0);
    const auto lines = progress_lines(result.output);
    REQUIRE(lines.size() == 2);
    CHECK(lines[1].rfind("epoch 1/1 step 5/5 loss ", 0) == 0);
    const auto records = read_lines(out.path / "steps.jsonl");
    REQUIRE(records.size() == 2);
    check_step_record(records[0], 1, 4);
    check_step_record(records[1], 1, 5);
  }
}
