// Training checkpoints: model parameters and buffers ("model.<name>"), optimizer state
// ("optim.<key>" tensors; scalars in the metadata as "optim.<key>"), and the run's position
// (epoch, step), resolved config and loss scaler state ("scaler.<key>", f16 runs) in the
// safetensors metadata. Written atomically through
// safetensors::write (temp file, fsync, rename), so a crash leaves the previous checkpoint.
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>

#include "nn/module.h"
#include "nn/optimizer.h"

namespace ringlet::trainer {

struct CheckpointInfo {
  std::int64_t epoch = 0;  // epochs completed
  std::int64_t step = 0;   // optimizer steps taken
  std::string config;      // the resolved config (JSON text)
  nn::NamedState scaler;   // GradScaler::state_dict() (scalars); empty when no loss scaling
};

// Where a run keeps its latest checkpoint: run_dir/checkpoint.safetensors.
std::filesystem::path checkpoint_path(const std::filesystem::path& run_dir);

void save_checkpoint(const std::filesystem::path& path, const nn::Module& model,
                     const nn::Optimizer* optimizer, const CheckpointInfo& info);
// The position, config and scaler state alone, from the file's header (its tensors are not
// read), checked as load_checkpoint checks them.
CheckpointInfo read_checkpoint_info(const std::filesystem::path& path);
// Loads into `model` (strict: every key and shape must match) and `optimizer` (if given).
// A missing, corrupt or mismatched file is an error naming it and what did not match.
CheckpointInfo load_checkpoint(const std::filesystem::path& path, nn::Module& model,
                               nn::Optimizer* optimizer);

}  // namespace ringlet::trainer
