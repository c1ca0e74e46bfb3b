// stderr logger; the level is read once from RINGLET_LOG.
#include "core/log.h"

#include <cstdio>
#include <cstdlib>
#include <string_view>

#include "core/env.h"

namespace ringlet::core {
namespace {

LogLevel configured_level() {
  static const LogLevel level = [] {
    const auto text = env_string("RINGLET_LOG").value_or("info");
    if (text == "debug") return LogLevel::debug;
    if (text == "info") return LogLevel::info;
    if (text == "warn") return LogLevel::warn;
    if (text == "error") return LogLevel::error;
    RINGLET_THROW(ValueError, "environment variable RINGLET_LOG=", text,
                  " is not one of debug, info, warn, error");
  }();
  return level;
}

}  // namespace

bool log_enabled(LogLevel level) { return level >= configured_level(); }

// Reads the variable itself, not configured_level(): that one throws through here.
std::string error_location(const char* file, int line) {
  const char* level = std::getenv("RINGLET_LOG");
  if (level == nullptr || std::string_view(level) != "debug") return "";
  return str(" [", file, ":", line, "]");
}

void log_line(LogLevel level, const std::string& message) {
  static constexpr const char* kNames[] = {"debug", "info", "warn", "error"};
  const std::string line = str("[ringlet ", kNames[static_cast<int>(level)], "] ", message, "\n");
  std::fwrite(line.data(), 1, line.size(), stderr);
}

}  // namespace ringlet::core
