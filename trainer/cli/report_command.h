// `ringlet report RUN [-o OUT.html]`: writes one self-contained HTML page about a run
// directory (trainer/report/run_report.h), RUN/report.html unless -o names another file.
#pragma once

#include <ostream>
#include <string>
#include <vector>

namespace ringlet::trainer::cli {

// Throws UsageError for bad arguments and core::Error when the run cannot be read or the page
// written; returns the exit status otherwise.
int report_command(const std::vector<std::string>& args, std::ostream& out);

// One line for the top-level help.
extern const char* const kReportSummary;

}  // namespace ringlet::trainer::cli
