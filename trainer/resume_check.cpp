// The run's recipe against a resuming command's config; see resume_check.h.
#include "trainer/resume_check.h"

#include <algorithm>
#include <array>

#include "checkpoint/checkpoint.h"
#include "core/error.h"
#include "trainer/config.h"
#include "trainer/usage_error.h"

namespace ringlet::trainer {
namespace {

using nlohmann::json;

// The keys a resume may change: none of them alters what the run learns from which batches.
bool resumable(const std::string& key) {
  static const std::array<const char*, 13> kKeys = {
      "epochs",        "max_restarts", "workers",    "threads", "log_every",
      "device",        "data_dir",     "limit_test", "tta",     "trace_steps",
      "deterministic", "cuda_graph",   "allow_tf32"};
  return std::any_of(kKeys.begin(), kKeys.end(), [&](const char* k) { return key == k; });
}

// The keys that say what to do with the run directory rather than how to train.
bool directory_key(const std::string& key) {
  return key == "out" || key == "resume" || key == "reset" || key == "resume_from";
}

// A run that stopped before its first checkpoint: the recipe it started with, epoch 0.
RunRecord unfinished_first_epoch(const std::filesystem::path& run_dir) {
  RunRecord run;
  run.checkpoint = checkpoint::checkpoint_path(run_dir);
  try {
    run.recipe = load_config_json((run_dir / "config.json").string());
  } catch (const core::ValueError& e) {
    RINGLET_THROW(ValueError, "--resume: ", run.checkpoint.string(), " does not exist and ",
                  e.what());
  }
  RINGLET_CHECK(run.recipe.is_object(), ValueError, "--resume: ", run.checkpoint.string(),
                " does not exist and ", (run_dir / "config.json").string(),
                " is not a JSON object");
  return run;
}

}  // namespace

bool schedule_key(const std::string& key) {
  static const std::array<const char*, 5> kKeys = {"lr", "schedule", "step_size", "gamma",
                                                   "warmup_epochs"};
  return std::any_of(kKeys.begin(), kKeys.end(), [&](const char* k) { return key == k; });
}

RunRecord read_run_record(const std::filesystem::path& run_dir) {
  RunRecord run;
  run.checkpoint = checkpoint::checkpoint_path(run_dir);
  if (!std::filesystem::exists(run.checkpoint)) {
    RINGLET_CHECK(std::filesystem::exists(run_dir / "history.jsonl") &&
                      std::filesystem::exists(run_dir / "config.json"),
                  ValueError, "--resume: ", run.checkpoint.string(),
                  " does not exist (train without --resume to start a new run)");
    return unfinished_first_epoch(run_dir);
  }
  run.has_checkpoint = true;
  const checkpoint::CheckpointInfo info = checkpoint::read_checkpoint_info(run.checkpoint);
  run.epoch = info.epoch;
  run.step = info.step;
  try {
    run.recipe = json::parse(info.config);
  } catch (const json::exception& e) {
    RINGLET_THROW(ValueError, "checkpoint ", run.checkpoint.string(),
                  ": its config is not valid JSON: ", e.what());
  }
  RINGLET_CHECK(run.recipe.is_object(), ValueError, "checkpoint ", run.checkpoint.string(),
                ": its config is not a JSON object");
  return run;
}

std::vector<RecipeChange> check_resume_changes(const RunRecord& run, const TrainConfig& config) {
  TrainConfig recorded;
  recorded.merge_json(run.recipe, "checkpoint " + run.checkpoint.string());
  const json before = recorded.to_json(), after = config.to_json();
  const bool fork = !config.resume_from.empty();
  std::vector<RecipeChange> changes;
  std::string refused;
  bool lr_refused = false;
  for (const auto& [key, value] : after.items()) {
    if (directory_key(key) || before.at(key) == value) continue;
    if (resumable(key) || (fork && schedule_key(key))) {
      changes.push_back({key, before.at(key), value});
    } else {
      refused += core::str(refused.empty() ? "" : ", ", key, " ", before.at(key).dump(), " -> ",
                           value.dump());
      lr_refused = lr_refused || schedule_key(key);
    }
  }
  if (!refused.empty()) {
    throw UsageError(core::str(
        "--resume continues the recipe its checkpoint ", run.checkpoint.string(),
        " was trained with; this command changes ", refused, ". Drop those options",
        lr_refused ? ", fork the run with --resume_from DIR --out NEW (the lr and its schedule "
                     "may change there)"
                   : "",
        ", or start a new run (another --out, or --reset)"));
  }
  if (config.epochs < run.epoch) {
    throw UsageError(core::str("--resume: the run has finished ", run.epoch, " epochs; --epochs ",
                               config.epochs,
                               " would end before them (--epochs must be >= ", run.epoch, ")"));
  }
  return changes;
}

std::string describe(const std::vector<RecipeChange>& changes) {
  std::string text;
  for (const RecipeChange& c : changes) {
    const auto show = [](const json& v) { return v.is_string() ? v.get<std::string>() : v.dump(); };
    text += core::str(text.empty() ? "" : ", ", c.key, " ", show(c.before), " -> ", show(c.after));
  }
  return text;
}

}  // namespace ringlet::trainer
