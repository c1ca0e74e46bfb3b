// Environment parsing with errors that name the variable.
#include "core/env.h"

#include <charconv>
#include <cstdlib>

#include "core/error.h"

namespace ringlet::core {

std::optional<std::string> env_string(const char* name) {
  const char* value = std::getenv(name);
  if (value == nullptr) return std::nullopt;
  return std::string(value);
}

std::int64_t parse_int(const std::string& text, const std::string& what) {
  std::int64_t value = 0;
  const char* end = text.data() + text.size();
  auto [ptr, ec] = std::from_chars(text.data(), end, value);
  RINGLET_CHECK(ec == std::errc() && ptr == end && !text.empty(), ValueError, what,
                ": expected an integer, got '", text, "'");
  return value;
}

std::int64_t env_int(const char* name, std::int64_t fallback, std::int64_t min_value,
                     std::int64_t max_value) {
  const auto text = env_string(name);
  if (!text) return fallback;
  const std::int64_t value = parse_int(*text, str("environment variable ", name));
  RINGLET_CHECK(value >= min_value && value <= max_value, ValueError, "environment variable ", name,
                "=", *text, " is out of range [", min_value, ", ", max_value, "]");
  return value;
}

}  // namespace ringlet::core
