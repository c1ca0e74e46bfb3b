// read_json_file: a JSON file read whole, or a ValueError "<what> <path>: cannot open it" /
// "<what> <path>: not JSON (...)" (the algorithm tables here, the model's profiles above).
#pragma once

#include <nlohmann/json.hpp>
#include <string>

namespace ringlet::collectives {

nlohmann::json read_json_file(const std::string& path, const std::string& what);

}  // namespace ringlet::collectives
