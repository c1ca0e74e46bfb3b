// End-to-end test helpers: the `ringlet` executable (RINGLET_BINARY from the environment, else
// the path tests/meson.build compiles in) and running a shell command to its end.
#pragma once

#include <doctest/doctest.h>
#include <sys/wait.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>

namespace ringlet::testing {

inline std::string ringlet_binary() {
  if (const char* env = std::getenv("RINGLET_BINARY"); env != nullptr && *env != '\0') return env;
#ifdef RINGLET_BINARY
  return RINGLET_BINARY;
#else
  return "";
#endif
}

// Fails the test unless the ringlet binary is there; returns its path.
inline std::string require_ringlet_binary() {
  const std::string binary = ringlet_binary();
  REQUIRE_MESSAGE(!binary.empty(), "RINGLET_BINARY is not set");
  REQUIRE_MESSAGE(std::filesystem::exists(binary), "no ringlet binary at ", binary);
  return binary;
}

// Starts `command` with /bin/sh, stdout and stderr together in the returned pipe.
inline FILE* start_command(const std::string& command) {
  FILE* pipe = ::popen((command + " 2>&1").c_str(), "r");
  REQUIRE(pipe != nullptr);
  return pipe;
}

// A finished command: its exit status (128 + N for signal N) and its output.
struct CommandResult {
  int status;
  std::string output;  // stdout and stderr together
};

// Reads a started command's output to its end.
inline CommandResult finish_command(FILE* pipe) {
  std::string output;
  char buffer[4096];
  while (std::size_t n = std::fread(buffer, 1, sizeof buffer, pipe)) output.append(buffer, n);
  const int status = ::pclose(pipe);
  return {WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status), output};
}

inline bool contains(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

}  // namespace ringlet::testing
