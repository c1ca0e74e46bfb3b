// The communicator's built-in algorithm tables (collectives/default_algorithm_tables.cpp) are
// the model's choice today: each world size's table is what `ringlet model table` computes under
// the default profile on hosts of 2 cores (`--cores-per-host 2`, the VM its figures come from),
// among the algorithms `auto` picks on its own. When the model or its profile changes, this fails
// until the tables are regenerated with the command the file names.
#include <doctest/doctest.h>

#include <string>

#include "collectives/default_algorithm_tables.h"
#include "model/predict.h"

using namespace ringlet;

namespace {

std::string text(const collectives::AlgorithmTable& table) {
  std::string out;
  for (const auto& row : table) {
    out += std::to_string(row.up_to_bytes) + ":" + collectives::algorithm_name(row.algorithm) + " ";
  }
  return out;
}

}  // namespace

TEST_CASE("the built-in algorithm tables are the model's under its default profile on 2 cores") {
  const auto& tables = collectives::default_algorithm_tables().all_reduce;
  REQUIRE(tables.size() == 7);
  for (const auto& entry : tables) {
    const int n = entry.first;  // not a structured binding: CAPTURE's lambda takes it
    const collectives::AlgorithmTable& table = entry.second;
    CAPTURE(n);
    const model::NetworkShape shape{n, 0};
    model::Profile two_cores = model::default_profile();
    two_cores.cores_per_host = 2;
    model::Predictor predictor(model::Collective::all_reduce, shape, two_cores,
                               model::table_algorithms(shape, two_cores));
    CHECK(text(table) == text(predictor.table(8, std::size_t{1} << 30)));
  }
  CHECK(collectives::default_algorithm_table(9).empty());  // beyond them: the thresholds
}
