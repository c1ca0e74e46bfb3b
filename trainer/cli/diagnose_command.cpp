// `ringlet diagnose DIR`: reads DIR/rank<R>.json and prints the story, verdict first.
#include "trainer/cli/diagnose_command.h"

#include <map>

#include "collectives/flight_analysis.h"
#include "trainer/cli/usage.h"

namespace ringlet::trainer::cli {

const char* const kDiagnoseSummary =
    "diagnose DIR                  who hung or failed, where and since when, from the flight\n"
    "                                recorder's dumps (RINGLET_FR_DIR)";

namespace {

constexpr const char* kHelp =
    "usage: ringlet diagnose DIR\n"
    "\n"
    "Reads the flight recorder dumps DIR/rank<R>[.NAME].json that every rank writes when a\n"
    "collective fails or times out (RINGLET_FR_DIR=DIR; RINGLET_FR_SIZE ops each, default 2000) "
    "and tells\n"
    "what happened, first lines first: which rank never joined op #S and which joined but\n"
    "stalled (waiting on which peer, after how many bytes), which issued a different op\n"
    "(desync), which left no dump (dead or stopped), and how far apart the ranks arrived at\n"
    "the last ops.\n"
    "\n"
    "options:\n"
    "  -h, --help   show this help\n";

}  // namespace

int diagnose_command(const std::vector<std::string>& args, std::ostream& out) {
  std::string dir;
  for (const std::string& arg : args) {
    if (arg == "-h" || arg == "--help") {
      out << kHelp;
      return 0;
    }
    if (!arg.empty() && arg[0] == '-') throw_unknown("diagnose", "option", arg, {"--help"});
    if (!dir.empty())
      throw UsageError("diagnose: one directory, not '" + dir + "' and '" + arg + "'");
    dir = arg;
  }
  if (dir.empty()) throw UsageError("diagnose: missing the dump directory (DIR)");
  std::map<std::string, std::vector<collectives::FlightDump>> by_communicator;
  for (auto& dump : collectives::read_flight_dumps(dir)) {
    by_communicator[dump.name].push_back(std::move(dump));
  }
  for (const auto& [name, dumps] : by_communicator) {
    if (by_communicator.size() > 1) out << "communicator " << name << ":\n";
    for (const std::string& line : collectives::diagnose_flight(dumps)) out << line << "\n";
  }
  return 0;
}

}  // namespace ringlet::trainer::cli
