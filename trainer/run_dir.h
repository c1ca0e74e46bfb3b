// The run directory of `ringlet train`: config.json (the resolved config), metrics.jsonl (one
// JSON record per epoch, appended) and checkpoint.safetensors (after the last finished epoch;
// checkpoint/checkpoint.h). Rank 0 alone writes there; every rank reads the checkpoint to
// resume.
#pragma once

#include <filesystem>
#include <string>

#include "trainer/config.h"

namespace ringlet::trainer {

// runs/<local date-time>: the run directory when none is given.
std::string default_run_dir();
// run_dir/metrics.jsonl
std::filesystem::path metrics_path(const std::filesystem::path& run_dir);
// Sets config.out to default_run_dir() when it is empty and returns it, ready for the run:
// --resume needs its checkpoint (ValueError otherwise); rank 0 removes the old checkpoint and
// metrics for --reset, creates the directory and writes config.json.
std::filesystem::path prepare_run_dir(TrainConfig& config, int rank);

}  // namespace ringlet::trainer
