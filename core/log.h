// Minimal leveled logging to stderr. RINGLET_LOG=debug|info|warn|error (default info).
// Lines are written whole, so output of several threads does not interleave mid-line.
#pragma once

#include <string>

#include "core/error.h"

namespace ringlet::core {

enum class LogLevel { debug = 0, info = 1, warn = 2, error = 3 };

bool log_enabled(LogLevel level);
void log_line(LogLevel level, const std::string& message);

template <class... Args>
void log(LogLevel level, const Args&... args) {
  if (log_enabled(level)) log_line(level, str(args...));
}

}  // namespace ringlet::core
