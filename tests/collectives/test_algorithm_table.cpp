// collectives/algorithm_table: the file of a model's algorithm tables, read back as written, a
// world size it lacks and bad files named, and RINGLET_ALGO_TABLE resolved into the options.
#include <doctest/doctest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>

#include "collectives/algorithm_table.h"
#include "collectives/default_algorithm_tables.h"
#include "collectives/options.h"
#include "core/error.h"

using namespace ringlet::collectives;
namespace fs = std::filesystem;

namespace {

std::string write_file(const std::string& name, const std::string& text) {
  const fs::path path = fs::temp_directory_path() / ("ringlet_algo_table_" + name + ".json");
  std::ofstream(path) << text;
  return path.string();
}

std::string error_of(const std::string& text, int world = 4) {
  try {
    algorithm_table_for(write_file("bad", text), world);
  } catch (const ringlet::core::ValueError& e) {
    return e.what();
  }
  return "";
}

std::string text(const AlgorithmTable& table) {
  std::string out;
  for (const auto& row : table) {
    out += std::to_string(row.up_to_bytes) + ":" + algorithm_name(row.algorithm) + " ";
  }
  return out;
}

}  // namespace

TEST_CASE("algorithm tables round-trip through their file") {
  AlgorithmTables tables;
  tables.source = "ringlet model table";
  tables.all_reduce[2] = {{4096, Algorithm::recursive_doubling}, {0, Algorithm::ring}};
  tables.all_reduce[8] = {
      {1024, Algorithm::tree}, {1 << 20, Algorithm::rabenseifner}, {0, Algorithm::ring}};
  const std::string path = write_file("roundtrip", algorithm_tables_json(tables));
  const AlgorithmTables back = read_algorithm_tables(path);
  CHECK(back.source == "ringlet model table");
  REQUIRE(back.all_reduce.size() == 2);
  const AlgorithmTable eight = algorithm_table_for(path, 8);
  REQUIRE(eight.size() == 3);
  CHECK(eight[0].up_to_bytes == 1024);
  CHECK(eight[0].algorithm == Algorithm::tree);
  CHECK(eight[1].algorithm == Algorithm::rabenseifner);
  CHECK(eight[2].up_to_bytes == 0);
  CHECK(table_choice(eight, 5000) == Algorithm::rabenseifner);
}

TEST_CASE("a bad algorithm table names the file and what is wrong") {
  const std::string two = R"({"all_reduce": {"2": [[0, "ring"]], "8": [[0, "ring"]]}})";
  CHECK(error_of(two).find("has no table for 4 ranks (it has 2, 8): make one with ringlet model "
                           "table --ranks 4") != std::string::npos);
  CHECK(error_of(R"({"all_reduce": {"4": [[0, "hierarchical"]]}})")
            .find("'hierarchical' is not an algorithm a table may hold") != std::string::npos);
  CHECK(error_of(R"({"all_reduce": {"4": [[1024, "rd"], [512, "ring"]]}})")
            .find("must grow in size") != std::string::npos);
  CHECK(
      error_of(R"({"all_reduce": {"4": [[0, "rd"], [512, "ring"]]}})").find("must grow in size") !=
      std::string::npos);
  CHECK(error_of(R"({"all_reduce": {"4": []}})").find("non-empty list") != std::string::npos);
  CHECK(error_of(R"({"all_reduce": {"4": [["1K", "rd"]]}})").find("is not [bytes, algorithm]") !=
        std::string::npos);
  CHECK(error_of(R"({"all_reduce": {"four": [[0, "rd"]]}})").find("'four' is not a world size") !=
        std::string::npos);
  CHECK(error_of(R"({"tables": {}})").find("must be an object with") != std::string::npos);
  CHECK(error_of("{oops").find("not JSON") != std::string::npos);
}

TEST_CASE("RINGLET_ALGO_TABLE gives the communicator's options the table of its world size") {
  const std::string path = write_file(
      "env", R"({"all_reduce": {"3": [[2048, "tree"], [0, "ring"]], "4": [[0, "rd"]]}})");
  setenv("RINGLET_ALGO_TABLE", path.c_str(), 1);
  const ResolvedOptions three = resolve_options(CommOptions{}, 3);
  REQUIRE(three.thresholds.table.size() == 2);
  CHECK(three.thresholds.table[0].algorithm == Algorithm::tree);
  CHECK(resolve_options(CommOptions{}, 4).thresholds.table.size() == 1);
  CHECK_THROWS_WITH_AS(resolve_options(CommOptions{}, 5), doctest::Contains("no table for 5 ranks"),
                       ringlet::core::ValueError);
  unsetenv("RINGLET_ALGO_TABLE");
  CommOptions given;
  given.algo_table = path;
  CHECK(resolve_options(given, 3).thresholds.table.size() == 2);
  CHECK_FALSE(resolve_options(given, 3).thresholds.table_is_builtin);
}

TEST_CASE("unset or RINGLET_ALGO_TABLE=model: the model's built-in tables; =thresholds: none") {
  unsetenv("RINGLET_ALGO_TABLE");
  const ResolvedOptions unset = resolve_options(CommOptions{}, 3);
  CHECK(unset.thresholds.table_is_builtin);
  CHECK(text(unset.thresholds.table) == text(default_algorithm_table(3)));
  setenv("RINGLET_ALGO_TABLE", "model", 1);
  const ResolvedOptions three = resolve_options(CommOptions{}, 3);
  CHECK(three.thresholds.table_is_builtin);
  CHECK_FALSE(three.thresholds.table.empty());
  CHECK(text(three.thresholds.table) == text(default_algorithm_table(3)));
  CHECK(resolve_options(CommOptions{}, 9).thresholds.table.empty());  // none for 9 ranks
  setenv("RINGLET_ALGO_TABLE", "thresholds", 1);
  CHECK(resolve_options(CommOptions{}, 3).thresholds.table.empty());
  CHECK_FALSE(resolve_options(CommOptions{}, 3).thresholds.table_is_builtin);
  unsetenv("RINGLET_ALGO_TABLE");
  CommOptions model;
  model.algo_table = "model";
  CHECK(text(resolve_options(model, 8).thresholds.table) == text(default_algorithm_table(8)));
  CommOptions thresholds;
  thresholds.algo_table = "thresholds";
  CHECK(resolve_options(thresholds, 8).thresholds.table.empty());
}
