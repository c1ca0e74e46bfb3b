// What each config key means and the values it takes, for `ringlet train --help`: one line per
// key, kept next to no code so that it reads as a reference. tests/trainer/test_config.cpp checks
// that every key has its line.
#pragma once

#include <string>

namespace ringlet::trainer {

// The key's help line; "" for a key that has none.
const std::string& config_key_help(const std::string& key);

}  // namespace ringlet::trainer
