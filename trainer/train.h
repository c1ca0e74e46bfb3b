// The single-process training loop behind `ringlet train`: data, model, optimizer and
// schedule from a TrainConfig; per epoch a training pass (progress bar on a TTY, plain lines
// otherwise), an evaluation on the test set, one summary line, a metrics.jsonl record and an
// atomic checkpoint in the run directory (run_dir.h). --resume continues from the run's last
// checkpoint.
#pragma once

#include <cstdint>
#include <ostream>
#include <string>

#include "collectives/communicator.h"
#include "nn/module.h"
#include "trainer/config.h"
#include "trainer/data/data_loader.h"

namespace ringlet::trainer {

struct EvalResult {
  double loss = 0;      // mean cross-entropy
  double accuracy = 0;  // fraction correct
  std::int64_t examples = 0;
};

struct TrainResult {
  std::string out_dir;
  int epochs_done = 0;
  EvalResult last_eval;
  std::int64_t skipped_steps = 0;  // f16: steps skipped because the gradients overflowed
};

// Evaluates on the loader's examples; with a communicator, every rank evaluates its own shard
// and the sums are all-reduced, so every rank returns the global result.
EvalResult evaluate(nn::Module& model, DataLoader& loader,
                    collectives::Communicator* comm = nullptr);
// With a communicator of several ranks: DistributedSampler shards, DDP gradient averaging,
// rank 0 alone prints, writes metrics and checkpoints; every rank loads a checkpoint to resume.
// With comm (several ranks) on a device, `space` is that device's space (DistributedContext).
TrainResult train(TrainConfig config, std::ostream& out, collectives::Communicator* comm = nullptr,
                  collectives::BufferSpace* space = nullptr);
// `ringlet eval --checkpoint F`: rebuilds the model the checkpoint's config names, loads it and
// evaluates on the test split.
EvalResult evaluate_checkpoint(const std::string& path, const std::string& data_dir,
                               std::ostream& out);

}  // namespace ringlet::trainer
