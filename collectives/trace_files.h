// Reading a trace directory: the trace.rank<R>.json files that Tracer (trace.h) writes, one per
// rank. load_traces() checks each file's structure and that every event belongs to its rank,
// so a renamed or foreign file is reported rather than drawn as a confusing timeline;
// merge_traces() joins them into one Chrome trace with one row (process) per rank.
#pragma once

#include <cstddef>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace ringlet::collectives {

struct RankTrace {
  int rank = 0;
  std::filesystem::path path;
  nlohmann::json events;  // the file's "traceEvents" array
};

// The rank R of a file named trace.rank<R>.json, or -1 for any other name.
int trace_file_rank(const std::string& file_name);

// Every trace.rank*.json in `dir`, sorted by rank. Throws core::Error, its message starting
// with `what` ("trace merge"), when dir is not a directory, holds no trace file, or a file is
// malformed (naming the file and the event).
std::vector<RankTrace> load_traces(const std::string& dir, const std::string& what);

// Merges every trace.rank*.json in `dir` into `out` (ranks as processes, named "rank R").
// Returns the number of events written; throws core::Error naming a malformed file.
std::size_t merge_traces(const std::string& dir, const std::string& out);

}  // namespace ringlet::collectives
