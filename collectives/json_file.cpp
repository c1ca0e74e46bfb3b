// A JSON file read whole, its errors named.
#include "collectives/json_file.h"

#include <fstream>

#include "core/error.h"

namespace ringlet::collectives {

nlohmann::json read_json_file(const std::string& path, const std::string& what) {
  std::ifstream in(path);
  RINGLET_CHECK(in.good(), ValueError, what, " ", path, ": cannot open it");
  try {
    return nlohmann::json::parse(in);
  } catch (const nlohmann::json::exception& e) {
    RINGLET_THROW(ValueError, what, " ", path, ": not JSON (", e.what(), ")");
  }
}

}  // namespace ringlet::collectives
