// The command line's own helpers over the usage errors it shares with the config
// (trainer/usage_error.h).
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "trainer/usage_error.h"

namespace ringlet::trainer::cli {

using trainer::nearest;
using trainer::throw_unknown;
using trainer::UsageError;

// "--flag value" or "--flag=value" at args[i]: its value, with i moved past it; nullopt when
// args[i] is something else. A missing value is a UsageError.
std::optional<std::string> flag_value(const std::vector<std::string>& args, std::size_t& i,
                                      const std::string& flag);

}  // namespace ringlet::trainer::cli
