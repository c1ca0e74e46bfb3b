// `ringlet trace merge DIR -o OUT.json`: joins the trace.rank<R>.json files of a trace
// directory into one Chrome trace (ranks as rows) for Perfetto or chrome://tracing.
// `ringlet trace report DIR`: each collective step next to the alpha-beta model
// (trace_report.h). Options take the forms -o OUT, --output OUT and --output=OUT; `--` ends
// the options.
#include "trainer/cli/trace_command.h"

#include <cstdint>
#include <limits>

#include "collectives/trace_files.h"
#include "trainer/cli/trace_report.h"
#include "trainer/cli/usage.h"

namespace ringlet::trainer::cli {

const char* const kTraceSummary =
    "trace merge|report DIR        merge a trace directory's per-rank files, or show each ring\n"
    "                                step next to the alpha-beta model";

namespace {

constexpr const char* kTraceHelp =
    "usage: ringlet trace <subcommand> ...\n"
    "\n"
    "Tools for the Chrome traces that `ringlet train --trace_steps N` writes to RUN/trace\n"
    "(and RINGLET_TRACE=DIR to DIR): one trace.rank<R>.json per rank, one event per step of\n"
    "every collective, and the training's compute spans.\n"
    "\n"
    "subcommands:\n"
    "  merge DIR -o OUT.json   merge DIR/trace.rank*.json into one file\n"
    "  report DIR              each collective, the steps of one, and where its time went,\n"
    "                          next to the alpha-beta model\n";

constexpr const char* kReportHelp =
    "usage: ringlet trace report DIR [--seq N] [--limit N] [--p2p FILE --transport T]\n"
    "\n"
    "Lists the collectives of DIR/trace.rank*.json, then every step of one of them on every\n"
    "rank (phase RS/AG, chunk, peer, bytes, us, GB/s) next to the alpha-beta model of a\n"
    "step, t = alpha + bytes / beta, and where its time went: alpha, bytes / beta, and what\n"
    "the model does not explain (waiting on a slower peer, reducing). The model is fitted\n"
    "through the fastest step of each message size in the trace, or read from p2p_perf.\n"
    "\n"
    "options:\n"
    "  --seq N          the collective to show step by step (default: the most bytes)\n"
    "  --limit N        collectives to list (default 20)\n"
    "  --p2p FILE       p2p_perf's output: alpha its latency, beta its bandwidth\n"
    "  --transport T    which of FILE's transports (tcp, shm, ...); needed with --p2p\n"
    "  -h, --help       show this help\n";

constexpr const char* kMergeHelp =
    "usage: ringlet trace merge DIR -o OUT.json\n"
    "\n"
    "Merges every DIR/trace.rank<R>.json into OUT.json, one row (process) per rank; open it\n"
    "in https://ui.perfetto.dev or chrome://tracing.\n"
    "\n"
    "options:\n"
    "  -o, --output OUT.json   the merged trace to write (required)\n"
    "  -h, --help              show this help\n";

int trace_merge_command(const std::vector<std::string>& args, std::ostream& out) {
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

std::int64_t count_value(const std::string& flag, const std::string& text, std::int64_t low,
                         std::int64_t high) {
  std::size_t used = 0;
  std::int64_t value = 0;
  try {
    value = std::stoll(text, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  if (used != text.size() || text.empty() || value < low || value > high) {
    throw UsageError(core::str("trace report: ", flag, " must be an integer in [", low, ", ", high,
                               "], got '", text, "'"));
  }
  return value;
}

int trace_report_command(const std::vector<std::string>& args, std::ostream& out) {
  const std::vector<std::string> options = {"--seq",       "--limit", "--p2p",
                                            "--transport", "-h",      "--help"};
  TraceReportOptions o;
  std::vector<std::string> positional;
  for (std::size_t i = 0; i < args.size(); ++i) {
    const std::string& arg = args[i];
    if (arg == "-h" || arg == "--help") {
      out << kReportHelp;
      return 0;
    }
    if (auto v = flag_value(args, i, "--seq")) {
      o.seq = count_value("--seq", *v, 0, std::numeric_limits<std::int64_t>::max());
    } else if (auto v = flag_value(args, i, "--limit")) {
      o.limit = static_cast<int>(count_value("--limit", *v, 1, 1000000));
    } else if (auto v = flag_value(args, i, "--p2p")) {
      o.p2p_file = *v;
    } else if (auto v = flag_value(args, i, "--transport")) {
      o.transport = *v;
    } else if (arg.size() > 1 && arg[0] == '-') {
      throw_unknown("trace report", "option", arg, options);
    } else {
      positional.push_back(arg);
    }
  }
  if (positional.size() != 1) {
    throw UsageError(positional.empty() ? "trace report: missing the trace directory DIR"
                                        : "trace report: expected one directory, got " +
                                              std::to_string(positional.size()));
  }
  if (!o.p2p_file.empty() && o.transport.empty()) {
    throw UsageError("trace report: --p2p needs --transport T (the transport the trace ran on)");
  }
  if (o.p2p_file.empty() && !o.transport.empty()) {
    throw UsageError("trace report: --transport names p2p_perf lines: give --p2p FILE too");
  }
  o.dir = positional[0];
  print_trace_report(o, out);
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
  if (sub == "merge") return trace_merge_command(rest, out);
  if (sub == "report") return trace_report_command(rest, out);
  throw_unknown("trace", "subcommand", sub, {"merge", "report"});
}

}  // namespace ringlet::trainer::cli
