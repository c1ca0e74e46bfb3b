// The file of algorithm tables (AlgorithmTable, algorithm_choice.h: the host all-reduce's
// algorithm by size as a cost model chose it): `ringlet model table` writes it,
// RINGLET_ALGO_TABLE or CommOptions::algo_table names it. It holds a table per world size:
//   {"source": "...", "all_reduce": {"4": [[8192, "rd"], [1048576, "rabenseifner"], [0, "ring"]]}}
// (0: no upper end). The algorithms are those the model simulates: ring, rd, rabenseifner, tree,
// and on one host with shared memory direct and window (a row naming one of those two where the
// ranks cannot run it leaves the size to the thresholds). default_algorithm_tables.h holds the
// model's tables under its default profile, which `auto` takes when none is named.
#pragma once

#include <cstddef>
#include <map>
#include <nlohmann/json_fwd.hpp>
#include <string>
#include <vector>

#include "collectives/algorithm_choice.h"

namespace ringlet::collectives {

// Every world size's table, and where they come from.
struct AlgorithmTables {
  std::string source;
  std::map<int, AlgorithmTable> all_reduce;
};
std::string algorithm_tables_json(const AlgorithmTables& tables);
// A file that is not such JSON, an algorithm the tables may not hold, rows out of order: a
// ValueError naming the file and what is wrong.
AlgorithmTables read_algorithm_tables(const std::string& path);
// The same checks on JSON already parsed; `path` names where it came from in the errors.
AlgorithmTables algorithm_tables_from_json(const nlohmann::json& doc, const std::string& path);
// `world_size`'s table from the file; one it has none for is a ValueError naming the world sizes
// it has.
AlgorithmTable algorithm_table_for(const std::string& path, int world_size);

}  // namespace ringlet::collectives
