// Training checkpoints: model parameters and buffers ("model.<name>"), optimizer state
// ("optim.<key>" tensors; scalars in the metadata as "optim.<key>"), and in the safetensors
// metadata the run's position (epoch, step, and "batches" of a checkpoint written mid-epoch),
// resolved config, lr schedule state ("schedule.<key>", PyTorch's scheduler.state_dict()), loss
// scaler state ("scaler.<key>", f16 runs) and a mid-epoch checkpoint's partial sums
// ("epoch_sums.<key>"). Every value is under the file's checksums (checksum.h). Written
// atomically through safetensors::write (temp file, fsync, rename), so a crash leaves the
// previous checkpoint.
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>

#include "nn/module.h"
#include "nn/optimizer.h"

namespace ringlet::checkpoint {

struct CheckpointInfo {
  std::int64_t epoch = 0;   // epochs completed
  std::int64_t step = 0;    // optimizer steps taken
  std::string config;       // the resolved config (JSON text)
  nn::NamedState scaler;    // GradScaler::state_dict() (scalars); empty when no loss scaling
  nn::NamedState schedule;  // LRScheduler::state_dict() (scalars); empty for a constant lr
  // A checkpoint written inside epoch `epoch` (a preempted run): the batches of that epoch
  // already trained and the sums of their record ("loss_sum", "seen", "skipped"); 0 and empty
  // for one written at an epoch's end.
  std::int64_t batches = 0;
  nn::NamedState epoch_sums;
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

}  // namespace ringlet::checkpoint
