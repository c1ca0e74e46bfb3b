// The single-process training loop behind `ringlet train`: data, model, optimizer and
// schedule from a TrainConfig; per epoch a training pass (progress bar on a TTY, plain lines
// otherwise), an evaluation on the test set, one summary line (with where every rank's steps
// went: rank_times.h), a metrics.jsonl record and an atomic checkpoint in the run directory
// (run_dir.h). --resume continues from the run's last
// checkpoint.
#pragma once

#include <cstdint>
#include <ostream>
#include <string>
#include <vector>

#include "collectives/communicator.h"
#include "data/data_loader.h"
#include "nn/module.h"
#include "trainer/config.h"

namespace ringlet::trainer {

struct EvalResult {
  double loss = 0;      // mean cross-entropy
  double accuracy = 0;  // fraction correct
  std::int64_t examples = 0;
  // With test-time augmentation, the accuracy of the images alone (else equal to accuracy).
  double single_view_accuracy = 0;
  // Per class (by label): examples and how many of them were predicted right.
  std::vector<std::int64_t> class_examples, class_correct;
};

struct EvalOptions {
  // Several ranks: each evaluates its own shard and the sums are all-reduced, so every rank
  // returns the global result.
  collectives::Communicator* comm = nullptr;
  bool mirror = false;       // tta "flip": logits are the mean of the image's and its mirror's
  std::int64_t classes = 0;  // the dataset's (labels are 0..classes-1); required
};

struct TrainResult {
  std::string out_dir;
  int epochs_done = 0;
  EvalResult last_eval;
  std::int64_t skipped_steps = 0;  // f16: steps skipped because the gradients overflowed
  // The signal that stopped the run early (SIGTERM, SIGINT, SIGUSR1: stop_request.h), after a
  // checkpoint at the step every rank had reached; 0 when it ran its epochs.
  int stop_signal = 0;
};

// Refuses, with the figures, `c.nproc` local ranks that would not fit this machine's memory
// (transport/job_footprint.h): each rank holds its dataset's images and a runtime of about
// 512 MiB (a fashion-mnist rank peaks at 0.5-0.65 GB); `command` names the job in the message.
void check_local_ranks_fit(const TrainConfig& c, const std::string& command);

// Evaluates the model (in eval mode, without gradients) on the loader's examples.
// ValueError when options.classes is not given (> 0) or a label is outside it.
EvalResult evaluate(nn::Module& model, data::DataLoader& loader, const EvalOptions& options);
// With a communicator of several ranks: DistributedSampler shards, DDP gradient averaging,
// rank 0 alone prints, writes metrics and checkpoints; every rank loads a checkpoint to resume.
// With comm (several ranks) on a device, `space` is that device's space (DistributedContext).
TrainResult train(TrainConfig config, std::ostream& out, collectives::Communicator* comm = nullptr,
                  collectives::BufferSpace* space = nullptr);
// The config a checkpoint was trained with (saved in its metadata); a ValueError naming the
// file when it has none.
TrainConfig checkpoint_config(const std::string& path);
// `ringlet eval`: rebuilds the model `c` names (c is checkpoint_config(path), perhaps with a
// new data_dir, limit_test, device or tta), loads the checkpoint's parameters and evaluates on
// the test split on c.device; with a communicator of several ranks, each rank its shard.
EvalResult evaluate_checkpoint(const std::string& path, TrainConfig c,
                               collectives::Communicator* comm = nullptr);

}  // namespace ringlet::trainer
