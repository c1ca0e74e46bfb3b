// Usage errors of the `ringlet` command line and the "did you mean" hint that names the
// nearest valid command or option. main() turns a UsageError into exit status 2 (as getopt
// tools and argparse do) and any other error into exit status 1.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "core/error.h"

namespace ringlet::trainer::cli {

class UsageError : public core::Error {
 public:
  using core::Error::Error;
};

// The choice closest to `word` by edit distance, or "" when none is close enough to be a
// plausible typo.
std::string nearest(const std::string& word, const std::vector<std::string>& choices);

// "--flag value" or "--flag=value" at args[i]: its value, with i moved past it; nullopt when
// args[i] is something else. A missing value is a UsageError.
std::optional<std::string> flag_value(const std::vector<std::string>& args, std::size_t& i,
                                      const std::string& flag);

// Throws "<context>: unknown <what> 'word' (did you mean 'x'?); valid: a, b, c" as a
// UsageError (no "<context>: " when context is empty).
[[noreturn]] void throw_unknown(const std::string& context, const std::string& what,
                                const std::string& word, const std::vector<std::string>& choices);

}  // namespace ringlet::trainer::cli
