// `ringlet diagnose DIR`: the story of a job that hung or failed, told from the flight recorder's
// dumps its ranks wrote (RINGLET_FR_DIR; collectives/flight_analysis.h).
#pragma once

#include <ostream>
#include <string>
#include <vector>

namespace ringlet::trainer::cli {

// Throws UsageError for bad arguments and core::Error when the dumps cannot be read; returns 0.
int diagnose_command(const std::vector<std::string>& args, std::ostream& out);

// One line for the top-level help.
extern const char* const kDiagnoseSummary;

}  // namespace ringlet::trainer::cli
