// A run directory's records as the report reads them: config.json (the recipe), metrics.jsonl
// (one record per epoch), steps.jsonl (one per log_every steps) and history.jsonl (one per
// command). A torn last line (a run writing right now, or killed mid-line) is left out; any
// other line that is not a JSON object is an error naming the file and line.
#pragma once

#include <filesystem>
#include <nlohmann/json.hpp>
#include <vector>

namespace ringlet::trainer::report {

struct RunRecords {
  std::filesystem::path dir;
  nlohmann::json config;  // an object
  std::vector<nlohmann::json> epochs, steps, history;
};

// Throws core::Error when dir holds no config.json (not a run directory) or a file is
// malformed.
RunRecords read_run_records(const std::filesystem::path& dir);

// The records of a JSON-lines file (none when it does not exist).
std::vector<nlohmann::json> read_json_lines(const std::filesystem::path& path);

}  // namespace ringlet::trainer::report
