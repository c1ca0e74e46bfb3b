// TrainConfig: defaults of the reference recipe, JSON files, command-line overrides, and the
// errors for unknown keys (with the nearest valid one), wrong types and bad values; the
// augmentation keys.
#include <doctest/doctest.h>

#include <filesystem>
#include <fstream>

#include "trainer/cli/usage.h"
#include "trainer/config.h"

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
                       doctest::Contains("key 'epochs' has the wrong type"), core::ValueError);
  TrainConfig bad;
  bad.lr = -1;
  CHECK_THROWS_WITH_AS(bad.validate(), doctest::Contains("lr must be > 0"), UsageError);
  bad = TrainConfig();
  bad.optimizer = "rmsprop";
  CHECK_THROWS_WITH_AS(bad.validate(), doctest::Contains("optimizer must be sgd, adam or adamw"),
                       UsageError);
}

TEST_CASE("config files") {
  namespace fs = std::filesystem;
  const fs::path dir = fs::temp_directory_path() / "ringlet_config_test";
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
  c.data_dir = "/data/cifar-10-batches-bin";
  CHECK_THROWS_WITH_AS(c.validate(), doctest::Contains("model fmnist_cnn takes 28x28"), UsageError);
  c.model = "resnet20";
  CHECK_NOTHROW(c.validate());
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
  CHECK_THROWS_WITH_AS(cifar.merge_json(nlohmann::json{{"mean", "x"}}, "cfg.json"),
                       doctest::Contains("expected a number or a list of numbers, got string"),
                       core::ValueError);
  CHECK_THROWS_WITH_AS(cifar.apply_overrides({"--mean", "0.5,x"}),
                       doctest::Contains("--mean: 'x' is not a valid number"), UsageError);
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
      doctest::Contains("augment: unknown augmentation 'rotate'; valid: crop, flip"), UsageError);
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
                       doctest::Contains("expected an integer or null, got string"),
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
