// `ringlet eval`: the checkpoint's config with the command line's overrides on top, then one
// process (or nproc local ranks, each evaluating its shard of the test set) and a report of
// the loss, the accuracy and the accuracy per class.
#include "trainer/cli/eval_command.h"

#include <algorithm>
#include <chrono>
#include <iomanip>
#include <iostream>

#include "core/env.h"
#include "distributed/launch/launcher.h"
#include "distributed/process_group.h"
#include "trainer/cli/usage.h"
#include "trainer/config.h"
#include "trainer/dataset_catalog.h"
#include "trainer/train.h"
#include "transport/discovery.h"

namespace ringlet::trainer::cli {

namespace {

// The config keys eval takes; the others would change what the checkpoint is.
const std::vector<std::string>& eval_keys() {
  static const std::vector<std::string> keys = {"data_dir", "limit_test", "nproc",
                                                "device",   "tta",        "workers"};
  return keys;
}

void print_eval_help(std::ostream& out) {
  out << "usage: ringlet " << kEvalSummary
      << "\n\n"
         "  --checkpoint F     the checkpoint (a run directory's checkpoint.safetensors)\n"
         "  --data_dir D       the dataset's files (default: the directory the run trained on)\n"
         "  --limit_test N     only the first N test examples (default 0: all)\n"
         "  --nproc N          local ranks, each evaluating its shard of the test set (1-256;\n"
         "                     default 1, whatever the run trained with)\n"
         "  --device D         cpu, emu[:N] or cuda[:N] (several ranks spread over the devices;\n"
         "                     default cpu)\n"
         "  --tta none|flip    flip: each image's logits are the mean of its own and its\n"
         "                     mirror image's (default: the run's tta)\n"
         "  --workers N        data loader threads\n"
         "Dashes and underscores are the same in keys (--data-dir).\n";
}

struct EvalArgs {
  bool help = false;
  std::string checkpoint;
  TrainConfig config;  // the checkpoint's, with the overrides
};

// The key of an option ("--data-dir=x" is data_dir), or "" for a value.
std::string option_key(const std::string& arg) {
  if (arg.rfind("--", 0) != 0) return "";
  std::string key =
      arg.substr(2, arg.find('=') == std::string::npos ? std::string::npos : arg.find('=') - 2);
  std::replace(key.begin(), key.end(), '-', '_');
  return key;
}

void check_eval_keys(const std::vector<std::string>& overrides) {
  std::vector<std::string> choices = {"--checkpoint", "--help"};
  for (const auto& k : eval_keys()) choices.push_back("--" + k);
  for (const auto& arg : overrides) {
    const std::string key = option_key(arg);
    if (key.empty()) continue;
    if (std::find(eval_keys().begin(), eval_keys().end(), key) == eval_keys().end()) {
      throw_unknown("eval", "option", arg.substr(0, arg.find('=')), choices);
    }
  }
}

EvalArgs parse_eval_args(const std::vector<std::string>& args) {
  EvalArgs parsed;
  std::vector<std::string> overrides;
  for (std::size_t i = 0; i < args.size(); ++i) {
    if (args[i] == "-h" || args[i] == "--help") {
      parsed.help = true;
      return parsed;
    }
    if (auto path = flag_value(args, i, "--checkpoint")) {
      parsed.checkpoint = *path;
    } else {
      overrides.push_back(args[i]);
    }
  }
  check_eval_keys(overrides);
  if (parsed.checkpoint.empty()) throw UsageError("eval: --checkpoint FILE is required");
  parsed.config = checkpoint_config(parsed.checkpoint);
  // How the run trained is not how to evaluate: one process on the CPU over the whole test
  // split unless the command line says otherwise (a cuda run's checkpoint works anywhere).
  const TrainConfig defaults;
  parsed.config.nproc = defaults.nproc;
  parsed.config.device = defaults.device;
  parsed.config.limit_test = defaults.limit_test;
  parsed.config.apply_overrides(overrides, {"--checkpoint", "--help"});
  parsed.config.validate();
  parsed.config.fill_dataset_defaults();
  return parsed;
}

// What is about to run, so that a default taken is never a surprise.
void print_plan(const EvalArgs& parsed, std::ostream& out) {
  const TrainConfig& c = parsed.config;
  out << "evaluating " << parsed.checkpoint << " on " << c.nproc << " rank(s), device " << c.device
      << ", "
      << (c.limit_test > 0 ? core::str("the first ", c.limit_test, " ") : std::string("all "))
      << c.dataset << " test examples, tta " << (c.tta.empty() ? "none" : c.tta) << "\n"
      << std::flush;
}

void print_eval(const EvalResult& r, const TrainConfig& c, std::ostream& out) {
  out << std::fixed << std::setprecision(4) << "test loss " << r.loss << ", test accuracy "
      << r.accuracy << " (" << r.examples << " examples";
  if (c.tta == "flip") out << "; tta flip, " << r.single_view_accuracy << " without";
  out << ")\nper class:\n";
  const DatasetInfo& data = *find_dataset(c.dataset);
  for (std::size_t k = 0; k < r.class_examples.size(); ++k) {
    const std::int64_t n = r.class_examples[k], right = r.class_correct[k];
    out << "  " << std::setw(2) << k << " " << std::left << std::setw(12)
        << (k < data.class_names.size() ? data.class_names[k] : "") << std::right << " "
        << (n > 0 ? static_cast<double>(right) / static_cast<double>(n) : 0.0) << " (" << right
        << "/" << n << ")\n";
  }
  out << std::flush;
}

// One rank of `ringlet eval --nproc N`: its shard, the sums all-reduced, rank 0 reports.
int eval_worker(EvalArgs parsed, std::ostream& out) {
  distributed::DistributedContext job = distributed::join_from_environment(
      "eval", core::Deadline::after(distributed::default_rdzv_timeout()));
  parsed.config.device = core::str(distributed::rank_device(parsed.config.device, job.info));
  const EvalResult r = evaluate_checkpoint(parsed.checkpoint, parsed.config, job.comm.get());
  if (job.info.rank == 0) print_eval(r, parsed.config, out);
  return 0;
}

}  // namespace

int eval_command(const std::vector<std::string>& args, std::ostream& out) {
  const EvalArgs parsed = parse_eval_args(args);
  if (parsed.help) {
    print_eval_help(out);
    return 0;
  }
  const bool worker = transport::launched_as_rank();
  if (!worker) print_plan(parsed, out);
  if (parsed.config.nproc > 1 && !worker) {
    check_local_ranks_fit(parsed.config, "ringlet eval");
    distributed::LaunchOptions launch_options;
    launch_options.nproc_per_node = parsed.config.nproc;
    launch_options.rdzv_timeout = distributed::default_rdzv_timeout();
    std::vector<std::string> command{"/proc/self/exe", "eval"};
    command.insert(command.end(), args.begin(), args.end());
    return distributed::launch(launch_options, command, out, std::cerr);
  }
  if (worker) return eval_worker(parsed, out);
  print_eval(evaluate_checkpoint(parsed.checkpoint, parsed.config), parsed.config, out);
  return 0;
}

}  // namespace ringlet::trainer::cli
