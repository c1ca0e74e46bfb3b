// `ringlet trace merge DIR -o OUT.json`: joins the trace.rank<R>.json files of a RINGLET_TRACE
// directory into one Chrome trace (ranks as rows) for Perfetto or chrome://tracing.
// Options take the forms -o OUT, --output OUT and --output=OUT; `--` ends the options.
#include "trainer/cli/trace_command.h"

#include "collectives/trace.h"
#include "trainer/cli/usage.h"

namespace ringlet::trainer::cli {

const char* const kTraceSummary =
    "trace merge DIR -o OUT.json   merge the per-rank traces that RINGLET_TRACE=DIR wrote";

namespace {

constexpr const char* kTraceHelp =
    "usage: ringlet trace <subcommand> ...\n"
    "\n"
    "Tools for the Chrome traces that RINGLET_TRACE=DIR writes (one trace.rank<R>.json per\n"
    "rank, one event per step of every collective).\n"
    "\n"
    "subcommands:\n"
    "  merge DIR -o OUT.json   merge DIR/trace.rank*.json into one file\n";

constexpr const char* kMergeHelp =
    "usage: ringlet trace merge DIR -o OUT.json\n"
    "\n"
    "Merges every DIR/trace.rank<R>.json into OUT.json, one row (process) per rank; open it\n"
    "in https://ui.perfetto.dev or chrome://tracing.\n"
    "\n"
    "options:\n"
    "  -o, --output OUT.json   the merged trace to write (required)\n"
    "  -h, --help              show this help\n";

int merge_command(const std::vector<std::string>& args, std::ostream& out) {
  const std::vector<std::string> options = {"-o", "--output", "-h", "--help"};
  std::vector<std::string> positional;
  std::string output;
  bool options_done = false;
  for (std::size_t i = 0; i < args.size(); ++i) {
    const std::string& arg = args[i];
    if (options_done || arg.empty() || arg[0] != '-' || arg == "-") {
      positional.push_back(arg);
    } else if (arg == "--") {
      options_done = true;
    } else if (arg == "-h" || arg == "--help") {
      out << kMergeHelp;
      return 0;
    } else if (arg == "-o" || arg == "--output") {
      if (i + 1 >= args.size()) throw UsageError("trace merge: " + arg + " needs a file name");
      output = args[++i];
    } else if (arg.rfind("--output=", 0) == 0) {
      output = arg.substr(9);
    } else {
      throw_unknown("trace merge", "option", arg, options);
    }
  }
  if (positional.empty()) throw UsageError("trace merge: missing the trace directory DIR");
  if (positional.size() > 1) {
    throw UsageError("trace merge: expected one directory, got " +
                     std::to_string(positional.size()) + " ('" + positional[0] + "', '" +
                     positional[1] + "'...)");
  }
  if (output.empty()) throw UsageError("trace merge: missing the output file: -o OUT.json");
  const std::size_t events = collectives::merge_traces(positional[0], output);
  out << "wrote " << output << ": " << events << " events from " << positional[0]
      << "; open it in https://ui.perfetto.dev or chrome://tracing\n";
  return 0;
}

}  // namespace

int trace_command(const std::vector<std::string>& args, std::ostream& out) {
  if (args.empty()) throw UsageError(std::string("trace: missing a subcommand\n") + kTraceHelp);
  const std::string& sub = args[0];
  if (sub == "-h" || sub == "--help" || sub == "help") {
    out << kTraceHelp;
    return 0;
  }
  const std::vector<std::string> rest(args.begin() + 1, args.end());
  if (sub == "merge") return merge_command(rest, out);
  throw_unknown("trace", "subcommand", sub, {"merge"});
}

}  // namespace ringlet::trainer::cli
