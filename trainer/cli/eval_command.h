// `ringlet eval`: a checkpoint evaluated on its dataset's test split, on one or several local
// ranks, on the CPU or a device, with or without test-time augmentation.
//   ringlet eval --checkpoint FILE [--data_dir D] [--limit_test N] [--nproc N] [--device D]
//                [--tta none|flip] [--workers N]
// The rest of the config (model, dataset, normalization) is the checkpoint's own.
#pragma once

#include <ostream>
#include <string>
#include <vector>

namespace ringlet::trainer::cli {

inline constexpr const char* kEvalSummary =
    "eval --checkpoint F [--nproc N] [--device D]  evaluate a checkpoint on the test set";

int eval_command(const std::vector<std::string>& args, std::ostream& out);

}  // namespace ringlet::trainer::cli
