// `ringlet train` and `ringlet eval`: argument parsing around trainer/train.h.
//   ringlet train [--recipe NAME | --config FILE.json] [--key value ...]   (keys: TrainConfig)
//   ringlet eval --checkpoint FILE [--data-dir DIR]
#pragma once

#include <ostream>
#include <string>
#include <vector>

namespace ringlet::trainer::cli {

inline constexpr const char* kTrainSummary =
    "train [--recipe R | --config F] [--nproc N] [--epochs N ...]  train a model (N local ranks)";
inline constexpr const char* kEvalSummary =
    "eval --checkpoint F [--data-dir D]          evaluate a checkpoint on the test set";

int train_command(const std::vector<std::string>& args, std::ostream& out);
int eval_command(const std::vector<std::string>& args, std::ostream& out);

}  // namespace ringlet::trainer::cli
