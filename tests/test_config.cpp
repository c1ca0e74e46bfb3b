// TrainConfig: defaults of the reference recipe, JSON files, command-line overrides, and the
// errors for unknown keys (with the nearest valid one), wrong types and bad values.
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
