// `ringlet trace ...`: tools for the per-rank Chrome traces that RINGLET_TRACE=dir writes.
// Only `ringlet trace merge DIR -o OUT.json` exists so far.
#pragma once

#include <ostream>
#include <string>
#include <vector>

namespace ringlet::trainer::cli {

// Runs `ringlet trace <args...>`, printing results to `out`. Throws UsageError for bad
// arguments and core::Error when the work itself fails; returns the exit status otherwise.
int trace_command(const std::vector<std::string>& args, std::ostream& out);

// One line for the top-level help: "trace merge DIR -o OUT.json   ...".
extern const char* const kTraceSummary;

}  // namespace ringlet::trainer::cli
