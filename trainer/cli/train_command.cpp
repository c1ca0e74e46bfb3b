// `ringlet train` / `ringlet eval`: a config file first, then overrides; --help lists keys.
#include "trainer/cli/train_command.h"

#include <filesystem>
#include <iomanip>
#include <iostream>
#include <sstream>

#include "core/env.h"
#include "trainer/checkpoint/checkpoint.h"
#include "trainer/cli/usage.h"
#include "trainer/config.h"
#include "trainer/data/dataset_catalog.h"
#include "trainer/distributed.h"
#include "trainer/launch/launcher.h"
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

// One rank of a distributed run: discovery from the environment (torchrun, Slurm, Open MPI
// variables), the store, the job token, a communicator, then the training loop.
// A restarted job (RINGLET_RESTART_COUNT > 0) resumes from the run directory's checkpoint.
int train_worker(TrainConfig config, std::ostream& out) {
  const auto restart = core::env_int("RINGLET_RESTART_COUNT", 0, 0, 1000);
  if (restart > 0) {  // the first attempt did any --reset
    config.reset = false;
    config.resume = !config.out.empty() && std::filesystem::exists(checkpoint_path(config.out));
  }
  // how long to wait for the other ranks: the launcher's --rdzv-timeout
  const auto rdzv = std::chrono::seconds(core::env_int("RINGLET_RDZV_TIMEOUT", 600, 1, 86400));
  DistributedContext job = join_from_environment("train", core::Deadline::after(rdzv));
  if (restart > 0 && job.info.rank == 0) {
    out << "restart " << restart << ": "
        << (config.resume ? "resuming from the last checkpoint"
                          : "no checkpoint yet, starting over")
        << std::endl;
  }
  const TrainResult result = train(config, out, job.comm.get());
  if (job.info.rank == 0) {
    out << "done: " << result.epochs_done << " epoch(s) on " << job.info.world_size
        << " ranks, test accuracy " << std::fixed << std::setprecision(4)
        << result.last_eval.accuracy << "; run directory " << result.out_dir << std::endl;
  }
  return 0;
}

// Every key with its default (mean, std and crop_padding default to the dataset's), then the
// datasets.
void print_train_help(std::ostream& out) {
  out << "usage: ringlet " << kTrainSummary << "\n\nkeys (--key value, defaults):\n";
  const auto defaults = TrainConfig().to_json();
  for (const auto& key : config_keys()) {
    out << "  --" << key << " ";
    if (key == "mean" || key == "std") {
      out << "(the dataset's, below; one value, or one per channel: 0.5,0.5,0.5)\n";
    } else if (defaults[key].is_null()) {
      out << "(the dataset's, below)\n";
    } else {
      out << defaults[key] << (key == "augment" ? " (none; crop, flip or crop,flip)" : "") << "\n";
    }
  }
  out << "\ndatasets (--dataset NAME; its files in --data_dir):\n";
  for (const DatasetInfo& d : dataset_catalog()) {
    out << "  " << std::left << std::setw(15) << d.name << d.channels << "x" << d.side << "x"
        << d.side << ", " << d.classes << " classes, mean " << join(d.mean) << ", std "
        << join(d.std) << ", crop padding " << d.crop_padding << "\n"
        << std::string(17, ' ') << d.files << (d.needs_data_dir ? "; needs --data_dir" : "")
        << "\n";
  }
  out << "The default --data_dir holds Fashion-MNIST (apt-get install dataset-fashion-mnist).\n"
         "fmnist_cnn takes only 28x28 single-channel images: train cifar10 with --model resnet20 "
         "or resnet18.\n";
}

}  // namespace

int train_command(const std::vector<std::string>& args, std::ostream& out) {
  TrainConfig config;
  std::vector<std::string> overrides;
  for (std::size_t i = 0; i < args.size(); ++i) {
    if (args[i] == "-h" || args[i] == "--help") {
      print_train_help(out);
      return 0;
    }
    if (args[i] == "--config" || args[i].rfind("--config=", 0) == 0) {
      std::string path;
      if (args[i] == "--config") {
        if (i + 1 >= args.size()) throw UsageError("--config needs a file");
        path = args[++i];
      } else {
        path = args[i].substr(9);
      }
      config.merge_json(load_config(path).to_json(), path);
      continue;
    }
    overrides.push_back(args[i]);
  }
  config.apply_overrides(overrides, {"--config", "--help"});
  config.validate();
  const bool worker = transport::launched_as_rank();
  if (config.nproc > 1 && !worker) {
    // Start nproc local workers running this same command; each one sees WORLD_SIZE and so
    // takes the distributed path below.
    // The run directory is fixed here, so that every worker (and every restart) uses one.
    LaunchOptions launch_options;
    launch_options.nproc_per_node = config.nproc;
    launch_options.max_restarts = config.max_restarts;
    std::vector<std::string> command{"/proc/self/exe", "train"};
    command.insert(command.end(), args.begin(), args.end());
    if (config.out.empty()) {
      command.push_back("--out");
      command.push_back(default_run_dir());
    }
    return launch(launch_options, command, out, std::cerr);
  }
  if (worker) return train_worker(config, out);
  const TrainResult result = train(config, out);
  out << "done: " << result.epochs_done << " epoch(s), test accuracy " << std::fixed
      << std::setprecision(4) << result.last_eval.accuracy << "; run directory " << result.out_dir
      << "\n";
  return 0;
}

int eval_command(const std::vector<std::string>& args, std::ostream& out) {
  std::string checkpoint, data_dir;
  for (std::size_t i = 0; i < args.size(); ++i) {
    const std::string& a = args[i];
    if (a == "-h" || a == "--help") {
      out << "usage: ringlet " << kEvalSummary << "\n";
      return 0;
    }
    if (a != "--checkpoint" && a != "--data-dir") {
      throw_unknown("eval", "option", a, {"--checkpoint", "--data-dir", "--help"});
    }
    if (i + 1 >= args.size()) throw UsageError(a + " needs a value");
    (a == "--checkpoint" ? checkpoint : data_dir) = args[++i];
  }
  if (checkpoint.empty()) throw UsageError("eval: --checkpoint FILE is required");
  evaluate_checkpoint(checkpoint, data_dir, out);
  return 0;
}

}  // namespace ringlet::trainer::cli
