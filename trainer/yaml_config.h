// Config files in YAML (the DDP configs PyTorch users keep): a YAML document read into the same
// JSON a .json config file gives, so one set of keys, types and checks serves both. Scalars are
// typed by YAML 1.2's core schema: null (~, null, empty), booleans (true/false, any case of
// those), integers (decimal, 0x hex, 0o octal), reals (1.5, 1e-3, .5); a quoted scalar is always
// a string. Anchors and aliases resolve; tags other than YAML's standard ones are refused.
#pragma once

#include <nlohmann/json.hpp>
#include <string>

namespace ringlet::trainer {

// Whether `path` names a YAML file (.yaml or .yml).
bool is_yaml_path(const std::string& path);
// The document in `text` as JSON; a ValueError naming `source`, the line and column of a
// syntax error, or the key whose value cannot be a config value.
nlohmann::json yaml_to_json(const std::string& text, const std::string& source);

}  // namespace ringlet::trainer
