// The `ringlet` command: dispatches to subcommands and maps errors to exit statuses
// (0 success, 1 the work failed, 2 the command line was wrong). Only main() exits; the
// subcommands live in the ringlet_trainer library and throw.
#include <exception>
#include <iostream>
#include <string>
#include <vector>

#include "core/error.h"
#include "core/isa.h"
#include "trainer/cli/diagnose_command.h"
#include "trainer/cli/eval_command.h"
#include "trainer/cli/launch_command.h"
#include "trainer/cli/model_command.h"
#include "trainer/cli/report_command.h"
#include "trainer/cli/status_command.h"
#include "trainer/cli/trace_command.h"
#include "trainer/cli/train_command.h"
#include "trainer/cli/usage.h"

namespace {

using ringlet::trainer::cli::UsageError;

void print_help(std::ostream& out) {
  out << "usage: ringlet <command> [args...]\n"
         "\n"
         "commands:\n"
         "  "
      << ringlet::trainer::cli::kTrainSummary << "\n  " << ringlet::trainer::cli::kEvalSummary
      << "\n  " << ringlet::trainer::cli::kLaunchSummary << "\n  "
      << ringlet::trainer::cli::kReportSummary << "\n  " << ringlet::trainer::cli::kTraceSummary
      << "\n  " << ringlet::trainer::cli::kDiagnoseSummary << "\n  "
      << ringlet::trainer::cli::kStatusSummary << "\n  " << ringlet::trainer::cli::kModelSummary
      << "\n"
         "\n"
         "Run 'ringlet <command> --help' for a command's options.\n";
}

int run(const std::vector<std::string>& args) {
  if (args.empty()) throw UsageError("missing a command");
  const std::string& command = args[0];
  if (command == "-h" || command == "--help" || command == "help") {
    print_help(std::cout);
    return 0;
  }
  try {
    ringlet::core::active_isa();  // a bad RINGLET_ISA stops every command before it starts
  } catch (const ringlet::core::ValueError& e) {
    throw UsageError(e.what());
  }
  const std::vector<std::string> rest(args.begin() + 1, args.end());
  if (command == "trace") return ringlet::trainer::cli::trace_command(rest, std::cout);
  if (command == "train") return ringlet::trainer::cli::train_command(rest, std::cout);
  if (command == "eval") return ringlet::trainer::cli::eval_command(rest, std::cout);
  if (command == "report") return ringlet::trainer::cli::report_command(rest, std::cout);
  if (command == "diagnose") return ringlet::trainer::cli::diagnose_command(rest, std::cout);
  if (command == "status") return ringlet::trainer::cli::status_command(rest, std::cout);
  if (command == "model") return ringlet::trainer::cli::model_command(rest, std::cout);
  if (command == "launch") {
    return ringlet::trainer::cli::launch_command(rest, std::cout, std::cerr);
  }
  if (!command.empty() && command[0] == '-') {
    ringlet::trainer::cli::throw_unknown("", "option", command, {"-h", "--help"});
  }
  ringlet::trainer::cli::throw_unknown(
      "", "command", command,
      {"train", "eval", "launch", "report", "trace", "diagnose", "status", "model"});
}

}  // namespace

int main(int argc, char** argv) {
  try {
    return run(std::vector<std::string>(argv + 1, argv + argc));
  } catch (const UsageError& e) {
    // One write each: a launcher stopping this worker right now must not cut a line in two.
    std::cerr << std::string("ringlet: ") + e.what() + "\nRun 'ringlet --help' for usage.\n";
    return 2;
  } catch (const std::exception& e) {
    std::cerr << std::string("ringlet: error: ") + e.what() + "\n";
    return 1;
  }
}
