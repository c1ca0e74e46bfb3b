// How a bench program starts and ends, the same way the ringlet CLI does:
//   -h / --help      the usage on stdout, exit 0;
//   a usage error    (an unknown flag, a missing or bad value, a RINGLET_ISA this CPU cannot
//                    run) "PROGRAM: what" and the usage on stderr, exit 2;
//   a failure        while running: "PROGRAM: what" on stderr, exit 1.
#pragma once

#include <cstdio>
#include <exception>
#include <string>

#include "core/isa.h"

namespace ringlet::bench {

inline bool help_requested(int argc, char** argv) {
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg == "-h" || arg == "--help") return true;
  }
  return false;
}

// parse(argc, argv) -> Options (usage errors throw); run(options) -> exit status.
template <class Parse, class Run>
int program_main(const char* program, const std::string& usage, int argc, char** argv, Parse parse,
                 Run run) {
  if (help_requested(argc, argv)) {
    std::fputs(usage.c_str(), stdout);
    return 0;
  }
  decltype(parse(argc, argv)) options;
  try {
    options = parse(argc, argv);
    core::active_isa();  // a bad RINGLET_ISA is a usage error, before anything starts
  } catch (const std::exception& e) {
    std::fprintf(stderr, "%s: %s\n%s", program, e.what(), usage.c_str());
    return 2;
  }
  try {
    return run(options);
  } catch (const std::exception& e) {
    std::fflush(stdout);
    std::fprintf(stderr, "%s: %s\n", program, e.what());
    return 1;
  }
}

}  // namespace ringlet::bench
