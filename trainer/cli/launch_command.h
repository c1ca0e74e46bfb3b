// `ringlet launch`: argument parsing around distributed/launch/launcher.h, with torchrun's flag
// names (dashes or underscores) and `--` or the first non-option word starting the command to run.
//   ringlet launch --nproc-per-node N [--nnodes M --node-rank R] [--master-addr A]
//                  [--master-port P] [--max-restarts K] [--rdzv-timeout S] [--quiet-others]
//                  [--] command args...
#pragma once

#include <ostream>
#include <string>
#include <vector>

namespace ringlet::trainer::cli {

inline constexpr const char* kLaunchSummary =
    "launch --nproc-per-node N [--] CMD ...      run CMD as N ranks (torchrun's flags)";

// Returns the launcher's status: 0, or the failing worker's exit status. Worker stdout lines go
// to `out`, stderr lines and the launcher's own messages to `err`.
int launch_command(const std::vector<std::string>& args, std::ostream& out, std::ostream& err);

}  // namespace ringlet::trainer::cli
