// UsageError: what the user asked for cannot be taken as given (an unknown command, flag, config
// key or recipe, a value out of range), raised by the command line and the config alike, with
// the "did you mean" hint that names the nearest valid word. main() turns a UsageError into exit
// status 2 (as getopt tools and argparse do) and any other error into exit status 1.
#pragma once

#include <string>
#include <vector>

#include "core/error.h"

namespace ringlet::trainer {

class UsageError : public core::Error {
 public:
  using core::Error::Error;
};

// The choice closest to `word` by edit distance, or "" when none is close enough to be a
// plausible typo.
std::string nearest(const std::string& word, const std::vector<std::string>& choices);

// Throws "<context>: unknown <what> 'word' (did you mean 'x'?); valid: a, b, c" as a
// UsageError (no "<context>: " when context is empty).
[[noreturn]] void throw_unknown(const std::string& context, const std::string& what,
                                const std::string& word, const std::vector<std::string>& choices);

}  // namespace ringlet::trainer
