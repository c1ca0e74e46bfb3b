// Reading settings from the environment. A malformed or out-of-range value is a ValueError
// naming the variable and the value seen; an unset variable yields the default.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

namespace ringlet::core {

std::optional<std::string> env_string(const char* name);
std::int64_t env_int(const char* name, std::int64_t fallback, std::int64_t min_value,
                     std::int64_t max_value);
// Parses a whole decimal integer; `what` names the source in the error message.
std::int64_t parse_int(const std::string& text, const std::string& what);

}  // namespace ringlet::core
