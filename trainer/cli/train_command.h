// `ringlet train`: argument parsing around trainer/train.h.
//   ringlet train [--recipe NAME | --config FILE.json] [--key value ...]   (keys: TrainConfig)
#pragma once

#include <ostream>
#include <string>
#include <vector>

namespace ringlet::trainer::cli {

inline constexpr const char* kTrainSummary =
    "train [--recipe R | --config F] [--nproc N] [--epochs N ...]  train a model (N local ranks)";

int train_command(const std::vector<std::string>& args, std::ostream& out);

}  // namespace ringlet::trainer::cli
