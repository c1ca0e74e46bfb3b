// TrainConfig: defaults of the reference recipe, JSON files (with comments), command-line
// overrides, and the errors for unknown keys (with the nearest valid one), wrong types and bad
// values; the augmentation keys; the recipes/ folder (every recipe loads and validates,
// fmnist_fast is `make train`'s run) and how `ringlet train --recipe` finds one.
#include <doctest/doctest.h>
#include <stdlib.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "data/idx_dataset.h"
#include "ringlet_command.h"
#include "temp_dir.h"
#include "trainer/cli/train_command.h"
#include "trainer/cli/usage.h"
#include "trainer/config.h"
#include "trainer/config_help.h"
#include "trainer/recipes.h"

using namespace ringlet;
using trainer::TrainConfig;
using trainer::cli::UsageError;

TEST_CASE("defaults are the reference recipe") {
  const TrainConfig c;
  CHECK(c.model == "fmnist_cnn");
  CHECK(c.batch_size == 64);
  CHECK(c.lr == 0.05);
  CHECK(c.momentum == 0.9);
  CHECK(c.weight_decay == 5e-4);
  CHECK(c.epochs == 3);
  CHECK_NOTHROW(c.validate());
  CHECK(c.to_json()["optimizer"] == "sgd");
}

TEST_CASE("overrides: --key value, --key=value, dashes, flags") {
  TrainConfig c;
  c.apply_overrides({"--epochs", "5", "--lr=0.1", "--batch-size", "32", "--resume", "--optimizer",
                     "adam", "--nesterov", "false"});
  CHECK(c.epochs == 5);
  CHECK(c.lr == 0.1);
  CHECK(c.batch_size == 32);
  CHECK(c.resume);
  CHECK(c.optimizer == "adam");
  CHECK_FALSE(c.nesterov);
}

TEST_CASE("unknown flags and keys name the nearest valid one") {
  TrainConfig c;
  CHECK_THROWS_WITH_AS(c.apply_overrides({"--epoch", "3"}),
                       doctest::Contains("unknown option '--epoch' (did you mean '--epochs'?)"),
                       UsageError);
  CHECK_THROWS_WITH_AS(c.apply_overrides({"--epochs", "three"}), doctest::Contains("--epochs"),
                       UsageError);
  CHECK_THROWS_WITH_AS(c.apply_overrides({"--lr"}), doctest::Contains("--lr needs a value"),
                       UsageError);
  CHECK_THROWS_WITH_AS(c.merge_json(nlohmann::json{{"learning_rate", 0.1}}, "cfg.json"),
                       doctest::Contains("cfg.json: unknown config key 'learning_rate'"),
                       UsageError);
  CHECK_THROWS_WITH_AS(c.merge_json(nlohmann::json{{"epochs", "many"}}, "cfg.json"),
                       doctest::Contains("cfg.json: key 'epochs' takes a whole number"),
                       core::ValueError);
  TrainConfig bad;
  bad.lr = -1;
  CHECK_THROWS_WITH_AS(bad.validate(), doctest::Contains("lr must be > 0"), UsageError);
  bad = TrainConfig();
  bad.optimizer = "rmsprop";
  CHECK_THROWS_WITH_AS(bad.validate(), doctest::Contains("optimizer must be sgd, adam or adamw"),
                       UsageError);
}

TEST_CASE("numbers are exact: nothing wraps, coerces, reads hex or is non-finite") {
  using nlohmann::json;
  const auto flag_error = [](std::vector<std::string> args) {
    TrainConfig c;
    try {
      c.apply_overrides(args);
    } catch (const UsageError& e) {
      return std::string(e.what());
    }
    return std::string("accepted");
  };
  const auto key_error = [](const json& in) {
    TrainConfig c;
    try {
      c.merge_json(in, "cfg.json");
    } catch (const core::ValueError& e) {
      return std::string(e.what());
    }
    return std::string("accepted");
  };
  // A whole-number key names its own range, not its type's (epochs and batch_size: >= 1).
  const std::string int_range = "takes a whole number in [1, 2147483647]";
  // 4294967297 would wrap to 1, 10000000000 to 1410065408
  CHECK(flag_error({"--epochs", "4294967297"}).find(int_range) != std::string::npos);
  CHECK(flag_error({"--epochs", "10000000000"}).find(int_range) != std::string::npos);
  CHECK(flag_error({"--workers", "10000000000"}).find("takes a whole number in [0, 64]") !=
        std::string::npos);
  CHECK(flag_error({"--batch_size", "64.5"}).find("not a valid whole number") != std::string::npos);
  CHECK(flag_error({"--seed", "-1"}).find("takes a whole number in [0, 18446744073709551615]") !=
        std::string::npos);
  for (const char* bad : {"0x10", "nan", "inf", "-inf", "1e999", "1.5.2", " 0.1", "1e", "."}) {
    CAPTURE(bad);
    CHECK(flag_error({"--lr", bad}).find("is not a finite decimal number") != std::string::npos);
  }
  CHECK(flag_error({"--mean", "0.5,nan"}).find("is not a finite decimal number") !=
        std::string::npos);
  for (const char* good : {"0.1", "1e-4", "+.5", "3", "2.E3"}) {
    CAPTURE(good);
    CHECK(flag_error({"--lr", good}) == "accepted");
  }
  CHECK(key_error({{"batch_size", true}}).find(int_range + ", got true (boolean)") !=
        std::string::npos);
  CHECK(key_error({{"batch_size", 64.5}}).find(int_range + ", got 64.5 (number)") !=
        std::string::npos);
  CHECK(key_error({{"epochs", 4294967297LL}}).find(int_range) != std::string::npos);
  CHECK(key_error({{"seed", -1}}).find("key 'seed' takes a whole number in [0, ") !=
        std::string::npos);
  CHECK(key_error({{"limit_train", 1.0}}).find("key 'limit_train' takes a whole number") !=
        std::string::npos);
  CHECK(key_error({{"lr", "0.1"}}).find("key 'lr' takes a finite number") != std::string::npos);
  CHECK(key_error({{"mean", json::array({0.5, "x"})}}).find("key 'mean' takes a finite number") !=
        std::string::npos);
  CHECK(key_error({{"crop_padding", 2.5}}).find("key 'crop_padding' takes a whole number") !=
        std::string::npos);
  CHECK(key_error({{"sync_bn", 1}}).find("key 'sync_bn' takes true or false") != std::string::npos);
  CHECK(key_error({{"seed", 18446744073709551615ULL}, {"limit_train", -5}}) == "accepted");
  TrainConfig bad;
  bad.clip_grad_norm = -1;
  CHECK_THROWS_WITH_AS(bad.validate(), doctest::Contains("clip_grad_norm must be >= 0"),
                       UsageError);
  // A config file whose number no double holds names the file.
  const auto dir = ringlet::testing::process_temp_path("ringlet_config_numbers");
  std::filesystem::create_directories(dir);
  std::ofstream(dir / "huge.json") << R"({"lr": 1e999})";
  CHECK_THROWS_WITH_AS(trainer::load_config((dir / "huge.json").string()),
                       doctest::Contains("huge.json is not valid JSON"), core::ValueError);
  std::filesystem::remove_all(dir);
}

TEST_CASE("config files") {
  namespace fs = std::filesystem;
  const fs::path dir = ringlet::testing::process_temp_path("ringlet_config_test");
  fs::create_directories(dir);
  std::ofstream(dir / "ok.json") << R"({"epochs": 7, "lr": 0.2, "model": "resnet20"})";
  const TrainConfig c = trainer::load_config((dir / "ok.json").string());
  CHECK(c.epochs == 7);
  CHECK(c.lr == 0.2);
  CHECK(c.model == "resnet20");
  CHECK(c.batch_size == 64);  // untouched keys keep their defaults
  std::ofstream(dir / "broken.json") << "{\"epochs\": ";
  CHECK_THROWS_WITH_AS(trainer::load_config((dir / "broken.json").string()),
                       doctest::Contains("broken.json is not valid JSON"), core::ValueError);
  CHECK_THROWS_WITH_AS(trainer::load_config((dir / "missing.json").string()),
                       doctest::Contains("missing.json cannot be opened"), core::ValueError);
  // a saved config loads back identically
  std::ofstream(dir / "round.json") << c.to_json().dump(2);
  CHECK(trainer::load_config((dir / "round.json").string()).to_json() == c.to_json());
  fs::remove_all(dir);
}

TEST_CASE("datasets: known names, the files they need, the model that takes them") {
  TrainConfig c;
  c.dataset = "cifar";
  CHECK_THROWS_WITH_AS(c.validate(),
                       doctest::Contains("dataset must be one of fashion-mnist, mnist, cifar10, "
                                         "got 'cifar' (did you mean 'cifar10'?)"),
                       UsageError);
  c.dataset = "cifar10";  // the default data_dir holds Fashion-MNIST
  CHECK_THROWS_WITH_AS(c.validate(),
                       doctest::Contains("dataset cifar10 needs --data_dir DIR, a directory "
                                         "holding data_batch_1..5.bin, test_batch.bin"),
                       UsageError);
  c.data_dir = "/usr/share/datasets/fashion-mnist/";  // the default, however it is written
  CHECK_THROWS_WITH_AS(c.validate(), doctest::Contains("dataset cifar10 needs --data_dir DIR"),
                       UsageError);
  c.data_dir = "/data/cifar-10-batches-bin";
  CHECK_THROWS_WITH_AS(c.validate(), doctest::Contains("model fmnist_cnn takes 28x28"), UsageError);
  c.model = "resnet20";
  CHECK_NOTHROW(c.validate());

  TrainConfig m;  // MNIST has its own default directory, never Fashion-MNIST's
  m.dataset = "mnist";
  if (!std::filesystem::exists(data::kDefaultMnistDir)) {
    CHECK_THROWS_WITH_AS(m.validate(),
                         doctest::Contains("dataset mnist reads /usr/share/datasets/mnist unless "
                                           "--data_dir says otherwise, and that directory does "
                                           "not exist"),
                         UsageError);
  }
  TrainConfig filled = m;
  filled.fill_dataset_defaults();
  CHECK(filled.data_dir == data::kDefaultMnistDir);
  CHECK(filled.mean == std::vector<double>{0.1307});
  m.data_dir = "/data/mnist";
  CHECK_NOTHROW(m.validate());
  m.fill_dataset_defaults();
  CHECK(m.data_dir == "/data/mnist");  // given: kept
}

TEST_CASE("ringlet train --dataset mnist: its own directory, or the one --data_dir names") {
  testing::TempDir dir("ringlet_mnist");
  const std::string binary = "timeout 120 '" + testing::require_ringlet_binary() + "' train ";
  if (!std::filesystem::exists(data::kDefaultMnistDir)) {
    const auto absent = testing::finish_command(testing::start_command(binary + "--dataset mnist"));
    CHECK(absent.status == 2);
    CHECK(testing::contains(absent.output, "/usr/share/datasets/mnist"));
    CHECK(testing::contains(absent.output, "never used for mnist"));
  }
  // IDX files in a directory of the user's (these hold Fashion-MNIST's images: the format is
  // MNIST's, and what the run records is MNIST's normalization and that directory).
  const std::filesystem::path data = dir.path / "mnist";
  std::filesystem::create_directories(data);
  for (const char* name : {"train-images-idx3-ubyte.gz", "train-labels-idx1-ubyte.gz",
                           "t10k-images-idx3-ubyte.gz", "t10k-labels-idx1-ubyte.gz"}) {
    std::filesystem::create_symlink(std::filesystem::path(data::kDefaultDataDir) / name,
                                    data / name);
  }
  const auto run = testing::finish_command(testing::start_command(
      binary + "--dataset mnist --data_dir '" + data.string() +
      "' --epochs 1 --limit_train 256 --limit_test 64 --threads 1 --workers 1 --out '" +
      (dir.path / "out").string() + "'"));
  INFO(run.output);
  REQUIRE(run.status == 0);
  std::ifstream saved(dir.path / "out" / "config.json");
  const auto config = nlohmann::json::parse(saved);
  CHECK(config.at("dataset") == "mnist");
  CHECK(config.at("data_dir") == data.string());
  CHECK(config.at("mean") == 0.1307);
}

TEST_CASE("mean and std: the dataset's unless given, one value or one per channel") {
  TrainConfig fashion;
  CHECK(fashion.mean.empty());
  CHECK(fashion.to_json()["mean"].is_null());
  fashion.fill_dataset_defaults();
  CHECK(fashion.mean == std::vector<double>{0.2860});
  CHECK(fashion.std == std::vector<double>{0.3530});
  CHECK(fashion.to_json()["mean"] == 0.2860);  // one value stays a plain number

  TrainConfig cifar;
  cifar.apply_overrides({"--dataset", "cifar10", "--data-dir", "/d", "--model", "resnet20", "--std",
                         "0.25,0.25,0.5"});
  CHECK_NOTHROW(cifar.validate());
  cifar.fill_dataset_defaults();
  CHECK(cifar.mean == std::vector<double>{0.4914, 0.4822, 0.4465});
  CHECK(cifar.std == std::vector<double>{0.25, 0.25, 0.5});  // given: kept
  CHECK(cifar.to_json()["std"] == nlohmann::json({0.25, 0.25, 0.5}));

  cifar.merge_json(nlohmann::json{{"mean", 0.5}}, "cfg.json");
  CHECK(cifar.mean == std::vector<double>{0.5});  // one value for every channel
  cifar.merge_json(nlohmann::json{{"mean", nullptr}}, "cfg.json");
  CHECK(cifar.mean.empty());
  CHECK_THROWS_WITH_AS(
      cifar.merge_json(nlohmann::json{{"mean", "x"}}, "cfg.json"),
      doctest::Contains("key 'mean' takes a number or a list of numbers, got \"x\""),
      core::ValueError);
  CHECK_THROWS_WITH_AS(cifar.apply_overrides({"--mean", "0.5,x"}),
                       doctest::Contains("--mean: 'x' is not a finite decimal number"), UsageError);
  cifar.apply_overrides({"--mean", "0.5,0.5"});
  CHECK_THROWS_WITH_AS(cifar.validate(),
                       doctest::Contains("mean needs 1 or 3 values for cifar10, got 2"),
                       UsageError);
  cifar.apply_overrides({"--mean", "0.5", "--std", "0"});
  CHECK_THROWS_WITH_AS(cifar.validate(), doctest::Contains("std must be > 0, got 0"), UsageError);
}

TEST_CASE("augment and crop_padding: names, the dataset's padding, ranges, types") {
  TrainConfig c;
  CHECK(c.to_json()["augment"] == "");
  CHECK(c.to_json()["crop_padding"].is_null());
  const trainer::Augmentations none = trainer::parse_augment(c.augment);
  CHECK_FALSE((none.crop || none.flip));
  CHECK_FALSE(trainer::parse_augment("none").crop);
  const trainer::Augmentations both = trainer::parse_augment(" flip, crop ");
  CHECK((both.crop && both.flip));
  c.apply_overrides({"--augment", "crop", "--crop-padding", "3"});
  CHECK(c.augment == "crop");
  CHECK(c.crop_padding == 3);
  CHECK(c.to_json()["crop_padding"] == 3);
  CHECK_NOTHROW(c.validate());
  c.fill_dataset_defaults();
  CHECK(c.crop_padding == 3);  // given: kept

  TrainConfig bad;
  bad.augment = "crop,rotate";
  CHECK_THROWS_WITH_AS(
      bad.validate(),
      doctest::Contains("augment: unknown augmentation 'rotate'; valid: crop, flip, erase"),
      UsageError);
  bad.augment = "crpo";
  CHECK_THROWS_WITH_AS(bad.validate(), doctest::Contains("(did you mean 'crop'?)"), UsageError);
  bad.augment = "flip,crop,flip";
  CHECK_THROWS_WITH_AS(bad.validate(), doctest::Contains("augment names 'flip' twice"), UsageError);
  bad.augment = "crop";
  bad.crop_padding = 15;
  CHECK_THROWS_WITH_AS(
      bad.validate(),
      doctest::Contains("crop_padding must be in [0, 14] for the 28x28 images of fashion-mnist, "
                        "got 15"),
      UsageError);
  bad.crop_padding = -1;
  CHECK_THROWS_WITH_AS(bad.validate(), doctest::Contains("crop_padding must be in [0, 14]"),
                       UsageError);
  CHECK_THROWS_WITH_AS(bad.apply_overrides({"--crop_padding", "two"}),
                       doctest::Contains("--crop_padding: 'two' is not a whole number"),
                       UsageError);
  CHECK_THROWS_WITH_AS(bad.merge_json(nlohmann::json{{"crop_padding", "2"}}, "cfg.json"),
                       doctest::Contains("key 'crop_padding' takes a whole number"),
                       core::ValueError);
  bad.merge_json(nlohmann::json{{"crop_padding", nullptr}}, "cfg.json");
  CHECK_FALSE(bad.crop_padding.has_value());

  // Unset, the padding is the dataset's: 2 for 28x28 images, 4 for CIFAR-10 (torchvision's).
  TrainConfig fashion;
  fashion.fill_dataset_defaults();
  CHECK(fashion.crop_padding == 2);
  TrainConfig cifar;
  cifar.apply_overrides({"--dataset", "cifar10", "--data-dir", "/d", "--model", "resnet20",
                         "--augment", "crop,flip", "--crop-padding", "16"});
  CHECK_NOTHROW(cifar.validate());  // half of 32
  cifar.crop_padding.reset();
  cifar.fill_dataset_defaults();
  CHECK(cifar.crop_padding == 4);
}

TEST_CASE("config files may carry comments; errors still name the file") {
  testing::TempDir dir("ringlet_config_comments");
  std::ofstream(dir.path / "commented.json") << "// a header line\n/* and a block */\n"
                                                "{\n  \"epochs\": 4, // trailing\n"
                                                "  \"augment\": \"flip\"\n}\n";
  const TrainConfig c = trainer::load_config((dir.path / "commented.json").string());
  CHECK(c.epochs == 4);
  CHECK(c.augment == "flip");
  std::ofstream(dir.path / "bad.json") << "// header\n{\"epochs\": 4,,}\n";
  CHECK_THROWS_WITH_AS(trainer::load_config((dir.path / "bad.json").string()),
                       doctest::Contains("bad.json is not valid JSON"), core::ValueError);
}

TEST_CASE("every key has a help line, and ringlet train --help prints it with the default") {
  const std::string command = "timeout 60 '" + testing::require_ringlet_binary() + "' train --help";
  const testing::CommandResult result = testing::finish_command(testing::start_command(command));
  REQUIRE(result.status == 0);
  for (const std::string& key : trainer::config_keys()) {
    CAPTURE(key);
    const std::string& help = trainer::config_key_help(key);
    CHECK(help.size() > 10);
    // "  --key   default   help" on one line
    const std::size_t at = result.output.find("  --" + key + " ");
    REQUIRE(at != std::string::npos);
    const std::string line = result.output.substr(at, result.output.find('\n', at) - at);
    CHECK(testing::contains(line, help));
  }
  CHECK(testing::contains(result.output, "none | flip"));
  CHECK(testing::contains(result.output, "  --epochs           3 "));
}

TEST_CASE("YAML config files: the JSON recipe's keys and types; errors name file and line") {
  testing::TempDir dir("ringlet_config_yaml");
  // fmnist_best written as a PyTorch user's DDP config would be: YAML, comments, a list.
  std::ofstream(dir.path / "best.yaml") << "# fmnist_best, in YAML\n"
                                           "model: fmnist_cnn\n"
                                           "nproc: 2\nepochs: 50\nbatch_size: 64\n"
                                           "optimizer: sgd\nlr: 0.1\nmomentum: 0.9\n"
                                           "nesterov: false\nweight_decay: 5.0e-4\n"
                                           "schedule: cosine\nwarmup_epochs: 1\n"
                                           "label_smoothing: .1\naugment: flip\n"
                                           "tta: flip\nseed: 0\n";
  TrainConfig yaml = trainer::load_config((dir.path / "best.yaml").string());
  TrainConfig json = trainer::load_config(
      (std::filesystem::path(RINGLET_SOURCE_ROOT) / "recipes" / "fmnist_best.json").string());
  CHECK(yaml.to_json() == json.to_json());
  // Flow style, hex, null (the dataset's padding), quoted strings stay strings.
  std::ofstream(dir.path / "flow.yml") << "{epochs: 0x3, mean: [0.5], crop_padding: ~, "
                                          "augment: 'crop,flip', out: \"123\"}\n";
  const TrainConfig flow = trainer::load_config((dir.path / "flow.yml").string());
  CHECK(flow.epochs == 3);
  CHECK(flow.mean == std::vector<double>{0.5});
  CHECK_FALSE(flow.crop_padding.has_value());
  CHECK(flow.augment == "crop,flip");
  CHECK(flow.out == "123");
  // A quoted number is a string, and the key's type says so; so is a word where a number goes.
  std::ofstream(dir.path / "quoted.yaml") << "lr: \"0.1\"\n";
  CHECK_THROWS_WITH_AS(trainer::load_config((dir.path / "quoted.yaml").string()),
                       doctest::Contains("key 'lr' takes a finite number, got \"0.1\" (string)"),
                       core::ValueError);
  std::ofstream(dir.path / "broken.yaml") << "epochs: 3\nlr: [0.1\n";
  CHECK_THROWS_WITH_AS(trainer::load_config((dir.path / "broken.yaml").string()),
                       doctest::Contains("broken.yaml is not valid YAML: line 3"),
                       core::ValueError);
  std::ofstream(dir.path / "twice.yaml") << "epochs: 3\nepochs: 4\n";
  CHECK_THROWS_WITH_AS(trainer::load_config((dir.path / "twice.yaml").string()),
                       doctest::Contains("key 'epochs' appears twice"), core::ValueError);
  std::ofstream(dir.path / "inf.yaml") << "lr: .inf\n";
  CHECK_THROWS_WITH_AS(trainer::load_config((dir.path / "inf.yaml").string()),
                       doctest::Contains("lr: .inf is not a finite number"), core::ValueError);
  std::ofstream(dir.path / "empty.yaml") << "# nothing yet\n";
  CHECK_THROWS_WITH_AS(trainer::load_config((dir.path / "empty.yaml").string()),
                       doctest::Contains("empty.yaml is empty: write one \"key: value\" line"),
                       core::ValueError);
  std::ofstream(dir.path / "list.yaml") << "- epochs: 3\n";
  CHECK_THROWS_WITH_AS(trainer::load_config((dir.path / "list.yaml").string()),
                       doctest::Contains("must be a YAML mapping of keys to values"),
                       core::ValueError);
  std::ofstream(dir.path / "typo.yaml") << "epoch: 3\n";
  CHECK_THROWS_WITH_AS(trainer::load_config((dir.path / "typo.yaml").string()),
                       doctest::Contains("did you mean"), UsageError);
}

TEST_CASE("ringlet train --config FILE.yaml trains with the file's keys") {
  testing::TempDir dir("ringlet_config_yaml_run");
  std::ofstream(dir.path / "run.yaml") << "epochs: 1\nlimit_train: 256\nlimit_test: 64\n"
                                          "lr: 0.07\naugment: flip\nthreads: 1\nworkers: 1\n";
  const std::string out = (dir.path / "out").string();
  const std::string command = "timeout 120 '" + testing::require_ringlet_binary() +
                              "' train --config '" + (dir.path / "run.yaml").string() +
                              "' --out '" + out + "'";
  const testing::CommandResult result = testing::finish_command(testing::start_command(command));
  INFO(result.output);
  REQUIRE(result.status == 0);
  std::ifstream saved(dir.path / "out" / "config.json");
  const auto config = nlohmann::json::parse(saved);
  CHECK(config.at("lr") == 0.07);
  CHECK(config.at("augment") == "flip");
  CHECK(config.at("limit_train") == 256);
}

namespace {

const std::filesystem::path kRecipes = std::filesystem::path(RINGLET_SOURCE_ROOT) / "recipes";

// Sets RINGLET_RECIPES_DIR for one scope (unset: the compiled-in recipes/ folder).
struct RecipesDirEnv {
  explicit RecipesDirEnv(const std::string& dir) {
    if (dir.empty()) {
      ::unsetenv("RINGLET_RECIPES_DIR");
    } else {
      ::setenv("RINGLET_RECIPES_DIR", dir.c_str(), 1);
    }
  }
  ~RecipesDirEnv() { ::unsetenv("RINGLET_RECIPES_DIR"); }
};

}  // namespace

TEST_CASE("every recipe loads, validates and documents its command; fmnist_fast is make train") {
  RecipesDirEnv env("");
  CHECK(std::filesystem::equivalent(trainer::recipes_dir(), kRecipes));
  const auto recipes = trainer::list_recipes();
  std::vector<std::string> names;
  for (const auto& r : recipes) names.push_back(r.name);
  CHECK(names == std::vector<std::string>{"cifar10_resnet18", "cifar10_resnet20", "fmnist_best",
                                          "fmnist_fast"});
  for (const auto& r : recipes) {
    CAPTURE(r.name);
    CHECK_FALSE(r.summary.empty());
    std::ifstream in(r.path);
    const std::string text{std::istreambuf_iterator<char>(in), {}};
    CHECK(text.find("ringlet train --recipe " + r.name) != std::string::npos);
    CHECK(text.find("Expected:") != std::string::npos);
    TrainConfig c = trainer::load_config(r.path.string());
    if (c.dataset == "cifar10") {  // the user brings the files: the error says so
      CHECK_THROWS_WITH_AS(c.validate(), doctest::Contains("needs --data_dir DIR"), UsageError);
      c.data_dir = "/data/cifar-10-batches-bin";
      CHECK(trainer::parse_augment(c.augment).crop);
      CHECK(trainer::parse_augment(c.augment).flip);
    }
    CHECK_NOTHROW(c.validate());
  }
  // fmnist_fast writes out the built-in defaults with the 2 ranks `make train` starts.
  TrainConfig fast = trainer::load_config((kRecipes / "fmnist_fast.json").string());
  TrainConfig make_train;
  make_train.nproc = 2;
  fast.fill_dataset_defaults();
  make_train.fill_dataset_defaults();
  CHECK(fast.to_json() == make_train.to_json());
}

TEST_CASE("--recipe: a name in the recipes folder or a file; errors name the choices") {
  namespace fs = std::filesystem;
  using trainer::find_recipe;
  {
    RecipesDirEnv env("");
    CHECK(find_recipe("fmnist_best") == kRecipes / "fmnist_best.json");
    CHECK(find_recipe("some/where.json") == fs::path("some/where.json"));
    CHECK(find_recipe("mine.json") == fs::path("mine.json"));
    CHECK_THROWS_WITH_AS(find_recipe("fmnist_bst"),
                         doctest::Contains("--recipe: unknown recipe 'fmnist_bst' (did you mean "
                                           "'fmnist_best'?); recipes in "),
                         UsageError);
    CHECK_THROWS_WITH_AS(find_recipe("resnet"), doctest::Contains("fmnist_best, fmnist_fast"),
                         UsageError);
    // --help lists each recipe with the first line of its header comment.
    std::ostringstream help;
    CHECK(trainer::cli::train_command({"--help"}, help) == 0);
    for (const auto& r : trainer::list_recipes()) {
      CHECK(help.str().find("  " + r.name + " ") != std::string::npos);
      CHECK(help.str().find(" " + r.summary + "\n") != std::string::npos);
    }
    std::ostringstream out;
    CHECK_THROWS_WITH_AS(
        trainer::cli::train_command(
            {"--config", (kRecipes / "fmnist_fast.json").string(), "--recipe", "fmnist_best"}, out),
        doctest::Contains("--recipe and --config cannot be combined"), UsageError);
    CHECK_THROWS_WITH_AS(
        trainer::cli::train_command({"--recipe", "fmnist_best", "--recipe=fmnist_fast"}, out),
        doctest::Contains("--recipe given twice"), UsageError);
    CHECK_THROWS_WITH_AS(trainer::cli::train_command({"--recipe"}, out),
                         doctest::Contains("--recipe needs a value"), UsageError);
    // A recipe's keys are validated like any config's, before anything runs.
    CHECK_THROWS_WITH_AS(
        trainer::cli::train_command({"--recipe", "fmnist_best", "--crop_padding", "20"}, out),
        doctest::Contains("crop_padding must be in [0, 14]"), UsageError);
  }
  // RINGLET_RECIPES_DIR names another folder.
  testing::TempDir dir("ringlet_recipes");
  std::ofstream(dir.path / "mine.json") << "// My recipe: one epoch\n{\"epochs\": 1}\n";
  std::ofstream(dir.path / "notes.txt") << "not a recipe";
  RecipesDirEnv env(dir.path.string());
  CHECK(trainer::recipes_dir() == dir.path);
  const auto recipes = trainer::list_recipes();
  REQUIRE(recipes.size() == 1);
  CHECK(recipes[0].name == "mine");
  CHECK(recipes[0].summary == "My recipe: one epoch");
  CHECK(find_recipe("mine") == dir.path / "mine.json");
  CHECK_THROWS_WITH_AS(find_recipe("fmnist_best"),
                       doctest::Contains(("recipes in " + dir.path.string() + ": mine").c_str()),
                       UsageError);
  fs::remove(dir.path / "mine.json");
  CHECK_THROWS_WITH_AS(find_recipe("mine"), doctest::Contains("no recipes in"), UsageError);
}
