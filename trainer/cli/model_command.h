// `ringlet model`: the cost model of collectives (model/): `predict` runs each algorithm's own
// code on a simulated network and prints its time and bus bandwidth, the fastest, and where the
// fastest changes with the size.
#pragma once

#include <ostream>
#include <string>
#include <vector>

namespace ringlet::trainer::cli {

// Throws UsageError for bad arguments and core::Error when a profile cannot be read; returns 0.
int model_command(const std::vector<std::string>& args, std::ostream& out);

// One line for the top-level help.
extern const char* const kModelSummary;

}  // namespace ringlet::trainer::cli
