// report_command: parses RUN and -o, writes the page, says what it holds.
#include "trainer/cli/report_command.h"

#include <filesystem>

#include "trainer/cli/usage.h"
#include "trainer/report/run_report.h"
#include "trainer/run_dir.h"

namespace ringlet::trainer::cli {

const char* const kReportSummary =
    "report RUN [-o OUT.html]      one HTML page about a run: curves, recipe, trace timelines";

namespace {

constexpr const char* kHelp =
    "usage: ringlet report RUN [-o OUT.html]\n"
    "\n"
    "Writes one self-contained HTML page (inline SVG; no script, nothing fetched) about the\n"
    "run directory RUN: what it trained and how far it got; loss, test accuracy, learning\n"
    "rate and images/s curves (per logged step and per epoch); its recipe and history; and,\n"
    "when it was trained with --trace_steps N, one training step on every rank (compute over\n"
    "collective steps: DDP's overlap), the ring's steps of its largest collective, and those\n"
    "steps next to the alpha-beta model. A run still training can be reported any time.\n"
    "\n"
    "options:\n"
    "  -o, --output OUT.html   where to write it (default RUN/report.html)\n"
    "  -h, --help              show this help\n";

}  // namespace

int report_command(const std::vector<std::string>& args, std::ostream& out) {
  std::vector<std::string> positional;
  std::string output;
  for (std::size_t i = 0; i < args.size(); ++i) {
    const std::string& arg = args[i];
    if (arg == "-h" || arg == "--help") {
      out << kHelp;
      return 0;
    }
    if (auto v = flag_value(args, i, "--output")) {
      output = *v;
    } else if (auto v = flag_value(args, i, "-o")) {
      output = *v;
    } else if (arg.size() > 1 && arg[0] == '-') {
      throw_unknown("report", "option", arg, {"-o", "--output", "-h", "--help"});
    } else {
      positional.push_back(arg);
    }
  }
  if (positional.empty()) throw UsageError("report: missing the run directory RUN");
  if (positional.size() > 1) {
    throw UsageError("report: expected one run directory, got " +
                     std::to_string(positional.size()) + " ('" + positional[0] + "', '" +
                     positional[1] + "'...)");
  }
  const std::filesystem::path run = positional[0];
  const std::filesystem::path file =
      output.empty() ? report_path(run) : std::filesystem::path(output);
  const report::ReportSummary s = report::write_run_report(run, file);
  out << "wrote " << file.string() << ": " << s.epochs << " epoch record(s), " << s.step_records
      << " step record(s), "
      << (s.traced_ranks > 0 ? std::to_string(s.traced_ranks) + " rank(s) traced"
                             : std::string("not traced"))
      << "\n";
  return 0;
}

}  // namespace ringlet::trainer::cli
