// `ringlet status RUN_DIR | HOST:PORT`: where every rank of a running job stands,
// read from the status board in the job's own store (collectives/status_board.h): lagging ranks
// first (stopped, stuck inside a collective, or busy outside one), then a line per rank.
#pragma once

#include <ostream>
#include <string>
#include <vector>

namespace ringlet::trainer::cli {

// Returns 0 when every rank is healthy, kStuckStatus when one has been silent or inside one op
// longer than --stuck-after; throws UsageError for bad arguments, core::Error when the store
// cannot be read.
int status_command(const std::vector<std::string>& args, std::ostream& out);
constexpr int kStuckStatus = 3;

// One line for the top-level help.
extern const char* const kStatusSummary;

}  // namespace ringlet::trainer::cli
