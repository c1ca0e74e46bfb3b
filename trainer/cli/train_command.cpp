// `ringlet train`: a recipe or config file first, then overrides; --help lists the keys and
// the recipes.
#include "trainer/cli/train_command.h"

#include <cstdlib>
#include <filesystem>
#include <iomanip>
#include <iostream>
#include <optional>
#include <sstream>

#include "checkpoint/checkpoint.h"
#include "core/env.h"
#include "distributed/launch/launcher.h"
#include "distributed/process_group.h"
#include "trainer/cli/usage.h"
#include "trainer/config.h"
#include "trainer/config_help.h"
#include "trainer/dataset_catalog.h"
#include "trainer/recipes.h"
#include "trainer/resume_check.h"
#include "trainer/run_dir.h"
#include "trainer/train.h"
#include "transport/discovery.h"

namespace ringlet::trainer::cli {

namespace {

std::string join(const std::vector<double>& values) {
  std::ostringstream text;
  for (std::size_t i = 0; i < values.size(); ++i) text << (i ? "," : "") << values[i];
  return text.str();
}

// The end of the done line: the last epoch's test accuracy, or that this command trained none
// (a resumed run that had finished).
std::string outcome(const TrainResult& result) {
  if (result.last_eval.examples == 0) return "no epoch left to train";
  std::ostringstream text;
  text << "test accuracy " << std::fixed << std::setprecision(4) << result.last_eval.accuracy;
  return text.str();
}

// One rank of a distributed run: discovery from the environment (torchrun, Slurm, Open MPI
// variables), the store, the job token, a communicator, then the training loop.
// A restarted job (RINGLET_RESTART_COUNT > 0) resumes from the run directory's checkpoint.
int train_worker(TrainConfig config, std::ostream& out) {
  const auto restart = core::env_int("RINGLET_RESTART_COUNT", 0, 0, 1000);
  if (restart > 0) {  // continue the run's own checkpoint, or start over (a fork: copy again)
    const bool saved =
        !config.out.empty() && std::filesystem::exists(checkpoint::checkpoint_path(config.out));
    config.resume = saved;
    config.reset = !saved;
    if (saved) config.resume_from.clear();
  }
  // A failed collective's flight recorder dumps go into the run directory, unless said otherwise.
  if (!config.out.empty() && !core::env_string("RINGLET_FR_DIR")) {
    ::setenv("RINGLET_FR_DIR", (std::filesystem::path(config.out) / "flight_recorder").c_str(), 1);
  }
  // how long to wait for the other ranks: the launcher's --rdzv-timeout
  const auto rdzv = distributed::default_rdzv_timeout();
  distributed::DistributedContext job =
      distributed::join_from_environment("train", core::Deadline::after(rdzv));
  if (restart > 0 && job.info.rank == 0) {
    out << "restart " << restart << ": "
        << (config.resume ? "resuming from the last checkpoint"
                          : "no checkpoint yet, starting over")
        << std::endl;
  }
  const core::Device device = distributed::rank_device(config.device, job.info);
  if (!device.is_cpu() && job.info.world_size > 1) {
    config.device = core::str(device);
    distributed::attach_device(job, "train", device, core::Deadline::after(rdzv));
  }
  const TrainResult result = train(config, out, job.comm.get(), job.space.get());
  if (result.stop_signal != 0) return 128 + result.stop_signal;  // train() said where it stopped
  if (job.info.rank == 0) {
    out << "done: " << result.epochs_done << " epoch(s) on " << job.info.world_size << " ranks, "
        << outcome(result) << "; run directory " << result.out_dir << std::endl;
  }
  return 0;
}

// The recipes found, each with the first line of its header comment, and where they were.
void print_recipes(std::ostream& out) {
  const std::vector<Recipe> recipes = list_recipes();
  out << "\nrecipes (--recipe NAME, then --key value overrides on top):\n";
  for (const Recipe& r : recipes) {
    out << "  " << std::left << std::setw(19) << r.name << " " << r.summary << "\n";
  }
  out << "  (" << (recipes.empty() ? "none in " : "from ") << recipes_dir().string()
      << "; RINGLET_RECIPES_DIR names another folder, --recipe FILE.json takes a file)\n";
}

// Every key with its default (mean, std and crop_padding default to the dataset's), then the
// recipes and the datasets.
void print_train_help(std::ostream& out) {
  out << "usage: ringlet " << kTrainSummary
      << "\n\nkeys (--key value or --key=value; dashes and underscores alike), default, meaning:\n";
  const auto defaults = TrainConfig().to_json();
  for (const auto& key : config_keys()) {
    std::string value = defaults[key].dump();
    if (key == "mean" || key == "std" || defaults[key].is_null()) value = "(dataset's)";
    out << "  --" << std::left << std::setw(16) << key << " " << std::setw(12) << value << " "
        << config_key_help(key) << "\n";
  }
  print_recipes(out);
  out << "\ndatasets (--dataset NAME; its files in --data_dir):\n";
  for (const DatasetInfo& d : dataset_catalog()) {
    out << "  " << std::left << std::setw(15) << d.name << d.channels << "x" << d.side << "x"
        << d.side << ", " << d.classes << " classes, mean " << join(d.mean) << ", std "
        << join(d.std) << ", crop padding " << d.crop_padding << "\n"
        << std::string(17, ' ') << d.files
        << (d.needs_data_dir ? "; needs --data_dir" : "; default --data_dir " + d.default_dir)
        << "\n";
  }
  out << "The default --data_dir holds Fashion-MNIST (apt-get install dataset-fashion-mnist).\n"
         "fmnist_cnn takes only 28x28 single-channel images: train cifar10 with --model resnet20 "
         "or resnet18.\n";
}

// What `ringlet train ARGS` asks for: --help, or a config (a recipe or config files, then the
// --key value overrides on top, wherever they stand on the line).
struct TrainArgs {
  bool help = false;
  TrainConfig config;
  std::string recipe;  // the --recipe argument, "" without one
  std::filesystem::path recipe_file;
};

// The config the files and overrides make, starting from `base`.
TrainConfig resolve(TrainConfig base,
                    const std::vector<std::pair<std::string, nlohmann::json>>& files,
                    const std::vector<std::string>& overrides) {
  for (const auto& [path, keys] : files) base.merge_json(keys, path);
  base.apply_overrides(overrides, {"--config", "--recipe", "--help"});
  return base;
}

// A resume starts from the run's recipe, not the defaults: files and overrides change it
// (what they may change is checked against the run when it starts; resume_check.h).
TrainConfig resolve_with_run(const std::vector<std::pair<std::string, nlohmann::json>>& files,
                             const std::vector<std::string>& overrides) {
  const TrainConfig asked = resolve(TrainConfig(), files, overrides);
  if (!resuming(asked) || asked.out.empty()) return asked;
  TrainConfig base;
  const RunRecord run = read_run_record(resume_source(asked));
  base.merge_json(run.recipe, "checkpoint " + run.checkpoint.string());
  base.resume = false;
  base.reset = false;
  base.resume_from.clear();
  return resolve(base, files, overrides);
}

TrainArgs parse_train_args(const std::vector<std::string>& args) {
  TrainArgs parsed;
  std::vector<std::string> overrides;
  std::vector<std::pair<std::string, nlohmann::json>> files;  // --config files, the recipe
  bool any_config = false;
  for (std::size_t i = 0; i < args.size(); ++i) {
    if (args[i] == "-h" || args[i] == "--help") {
      parsed.help = true;
      return parsed;
    }
    if (auto path = flag_value(args, i, "--config")) {
      files.emplace_back(*path, load_config_json(*path));
      any_config = true;
    } else if (auto name = flag_value(args, i, "--recipe")) {
      if (!parsed.recipe.empty()) {
        throw UsageError("--recipe given twice ('" + parsed.recipe + "', '" + *name + "')");
      }
      parsed.recipe = *name;
    } else {
      overrides.push_back(args[i]);
    }
  }
  if (!parsed.recipe.empty()) {
    if (any_config) {
      throw UsageError(
          "--recipe and --config cannot be combined (a recipe is a config file: override its "
          "keys with --key value, or copy it and pass --config)");
    }
    parsed.recipe_file = find_recipe(parsed.recipe);
    files.emplace_back(parsed.recipe_file.string(), load_config_json(parsed.recipe_file.string()));
  }
  parsed.config = resolve_with_run(files, overrides);
  return parsed;
}

}  // namespace

int train_command(const std::vector<std::string>& args, std::ostream& out) {
  TrainArgs parsed = parse_train_args(args);
  if (parsed.help) {
    print_train_help(out);
    return 0;
  }
  TrainConfig& config = parsed.config;
  config.validate();
  const bool worker = transport::launched_as_rank();
  if (!parsed.recipe.empty() && !worker) {
    out << "recipe " << parsed.recipe << ": " << parsed.recipe_file.string() << std::endl;
  }
  if (config.nproc > 1 && !worker) {
    check_local_ranks_fit(config, "ringlet train");
    // Start nproc local workers running this same command; each one sees WORLD_SIZE and so
    // takes the distributed path below.
    // The run directory is fixed here, so that every worker (and every restart) uses one.
    distributed::LaunchOptions launch_options;
    launch_options.nproc_per_node = config.nproc;
    launch_options.max_restarts = config.max_restarts;
    launch_options.rdzv_timeout = distributed::default_rdzv_timeout();  // the workers get it too
    std::vector<std::string> command{"/proc/self/exe", "train"};
    command.insert(command.end(), args.begin(), args.end());
    if (config.out.empty()) {
      command.push_back("--out");
      command.push_back(default_run_dir());
    }
    return distributed::launch(launch_options, command, out, std::cerr);
  }
  if (worker) return train_worker(config, out);
  const TrainResult result = train(config, out);
  if (result.stop_signal != 0) return 128 + result.stop_signal;  // train() said where it stopped
  out << "done: " << result.epochs_done << " epoch(s), " << outcome(result) << "; run directory "
      << result.out_dir << "\n";
  return 0;
}

}  // namespace ringlet::trainer::cli
