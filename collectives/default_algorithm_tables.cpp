// The default algorithm tables: `ringlet model table --ranks 2,3,4,5,6,7,8 --cores-per-host 2`'s
// output, as it wrote it: the default profile on hosts of 2 cores, the VM its figures come from
// (regenerate with that command when the model or its default profile changes; the test that
// compares them says so).
#include "collectives/default_algorithm_tables.h"

#include <nlohmann/json.hpp>

namespace ringlet::collectives {
namespace {

constexpr const char* kTables = R"json(
{"source": "ringlet model table --ranks 2,3,4,5,6,7,8 --cores-per-host 2 (the default profile)",
 "all_reduce": {
  "2": [[131072, "rd"], [262144, "window"], [524288, "rd"], [0, "window"]],
  "3": [[32768, "rd"], [0, "window"]],
  "4": [[32768, "rd"], [0, "window"]],
  "5": [[32768, "rd"], [0, "window"]],
  "6": [[32768, "rd"], [0, "window"]],
  "7": [[65536, "rd"], [0, "window"]],
  "8": [[16384, "rd"], [0, "window"]]
 }}
)json";

}  // namespace

const AlgorithmTables& default_algorithm_tables() {
  static const AlgorithmTables tables =
      algorithm_tables_from_json(nlohmann::json::parse(kTables), "(built-in default tables)");
  return tables;
}

AlgorithmTable default_algorithm_table(int world_size) {
  const auto& tables = default_algorithm_tables().all_reduce;
  const auto it = tables.find(world_size);
  return it != tables.end() ? it->second : AlgorithmTable{};
}

}  // namespace ringlet::collectives
