// What a resume may change. A run's recipe is the config its checkpoint was trained with (the
// checkpoint's metadata); a resume continues that recipe. It may change only what leaves the
// learning alone: more epochs, where and how fast it computes (device, threads, workers), the
// restart budget, logging, the data's location and the size of the test subset (the keys
// out, resume, reset and resume_from say what to do with the run directory and are not part
// of the recipe). A fork (--resume_from) may also change the lr and its schedule. Any other
// change is refused, naming each key with the run's value and the command's.
#pragma once

#include <cstdint>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "trainer/config.h"

namespace ringlet::trainer {

// The state of a run to resume: its recipe and the epochs it finished.
struct RunRecord {
  std::filesystem::path checkpoint;
  bool has_checkpoint = false;  // false: stopped in its first epoch, resumed from the start
  nlohmann::json recipe;        // the resolved config the checkpoint was trained with
  std::int64_t epoch = 0;       // epochs finished
  std::int64_t step = 0;        // optimizer steps taken (inside epoch + 1 when stopped there)
};

// Reads the checkpoint's metadata only (not its tensors). A run stopped before its first
// checkpoint (config.json and history.jsonl, no checkpoint) is epoch 0 of config.json's recipe.
// ValueError when there is no run ("train without --resume to start a new run") or its
// checkpoint's metadata is not a ringlet run's.
RunRecord read_run_record(const std::filesystem::path& run_dir);

struct RecipeChange {
  std::string key;
  nlohmann::json before;  // the run's
  nlohmann::json after;   // this command's
};

// The keys of the lr schedule (lr, schedule, step_size, gamma, warmup_epochs), which a fork
// (--resume_from) may change besides, so that a run that diverged can go on from its last good
// checkpoint with a smaller lr; the schedule is then rebuilt (schedule_resume.h) and the change
// recorded in history.jsonl.
bool schedule_key(const std::string& key);

// The keys in which `config` differs from the run's recipe, all of them ones a resume may
// change; a UsageError naming every other change, or fewer epochs than the run has finished.
std::vector<RecipeChange> check_resume_changes(const RunRecord& run, const TrainConfig& config);

// "epochs 3 -> 5, device cpu -> emu"
std::string describe(const std::vector<RecipeChange>& changes);

}  // namespace ringlet::trainer
