// Algorithm tables: lookup, and the JSON file checked row by row.
#include "collectives/algorithm_table.h"

#include <nlohmann/json.hpp>

#include "collectives/json_file.h"
#include "core/error.h"

namespace ringlet::collectives {
namespace {

constexpr Algorithm kTableAlgorithms[] = {Algorithm::ring,         Algorithm::recursive_doubling,
                                          Algorithm::rabenseifner, Algorithm::tree,
                                          Algorithm::direct,       Algorithm::window};

Algorithm table_algorithm(const std::string& path, const std::string& name) {
  for (const Algorithm a : kTableAlgorithms) {
    if (name == algorithm_name(a)) return a;
  }
  RINGLET_THROW(ValueError, "algorithm table ", path, ": '", name,
                "' is not an algorithm a table may hold (ring, rd, rabenseifner, tree, direct, "
                "window)");
}

AlgorithmTable read_rows(const std::string& path, const std::string& world,
                         const nlohmann::json& rows) {
  RINGLET_CHECK(rows.is_array() && !rows.empty(), ValueError, "algorithm table ", path,
                ": the table for ", world, " ranks must be a non-empty list of [bytes, algorithm]");
  AlgorithmTable table;
  for (const auto& row : rows) {
    RINGLET_CHECK(
        row.is_array() && row.size() == 2 && row[0].is_number_unsigned() && row[1].is_string(),
        ValueError, "algorithm table ", path, ": row ", row.dump(), " of ", world,
        " ranks is not [bytes, algorithm]");
    const SizeChoice choice{row[0].get<std::size_t>(), table_algorithm(path, row[1])};
    RINGLET_CHECK(table.empty() ||
                      (table.back().up_to_bytes != 0 &&
                       (choice.up_to_bytes == 0 || choice.up_to_bytes > table.back().up_to_bytes)),
                  ValueError, "algorithm table ", path, ": the rows of ", world,
                  " ranks must grow in size, with 0 (any size) only last");
    table.push_back(choice);
  }
  return table;
}

}  // namespace

std::string algorithm_tables_json(const AlgorithmTables& tables) {
  nlohmann::json by_world = nlohmann::json::object();
  for (const auto& [world, table] : tables.all_reduce) {
    nlohmann::json rows = nlohmann::json::array();
    for (const SizeChoice& row : table) {
      rows.push_back(nlohmann::json::array({row.up_to_bytes, algorithm_name(row.algorithm)}));
    }
    by_world[std::to_string(world)] = rows;
  }
  return nlohmann::json{{"source", tables.source}, {"all_reduce", by_world}}.dump(1) + "\n";
}

AlgorithmTables read_algorithm_tables(const std::string& path) {
  return algorithm_tables_from_json(read_json_file(path, "algorithm table"), path);
}

AlgorithmTables algorithm_tables_from_json(const nlohmann::json& doc, const std::string& path) {
  RINGLET_CHECK(doc.is_object() && doc.contains("all_reduce") && doc["all_reduce"].is_object(),
                ValueError, "algorithm table ", path,
                ": must be an object with \"all_reduce\": {world size: rows}");
  AlgorithmTables tables;
  if (doc.contains("source") && doc["source"].is_string()) tables.source = doc["source"];
  for (const auto& [world, rows] : doc["all_reduce"].items()) {
    int n = 0;
    try {
      std::size_t used = 0;
      n = std::stoi(world, &used);
      if (used != world.size()) n = 0;
    } catch (const std::exception&) {
      n = 0;
    }
    RINGLET_CHECK(n >= 1, ValueError, "algorithm table ", path, ": '", world,
                  "' is not a world size");
    tables.all_reduce[n] = read_rows(path, world, rows);
  }
  return tables;
}

AlgorithmTable algorithm_table_for(const std::string& path, int world_size) {
  const AlgorithmTables tables = read_algorithm_tables(path);
  const auto it = tables.all_reduce.find(world_size);
  if (it != tables.all_reduce.end()) return it->second;
  std::string have;
  for (const auto& [n, table] : tables.all_reduce)
    have += (have.empty() ? "" : ", ") + std::to_string(n);
  RINGLET_THROW(ValueError, "algorithm table ", path, " has no table for ", world_size,
                " ranks (it has ", have.empty() ? "none" : have,
                "): make one with ringlet model table --ranks ", world_size);
}

}  // namespace ringlet::collectives
