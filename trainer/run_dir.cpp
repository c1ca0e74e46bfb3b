// The run directory: its name, its files, and what a new, resumed or reset run does to it.
#include "trainer/run_dir.h"

#include <ctime>
#include <fstream>
#include <iomanip>
#include <sstream>

#include "core/error.h"
#include "trainer/checkpoint/checkpoint.h"

namespace ringlet::trainer {
namespace fs = std::filesystem;

std::string default_run_dir() {
  const std::time_t now = std::time(nullptr);
  std::tm local{};
  localtime_r(&now, &local);
  std::ostringstream name;
  name << "runs/" << std::put_time(&local, "%Y%m%d-%H%M%S");
  return name.str();
}

fs::path metrics_path(const fs::path& run_dir) { return run_dir / "metrics.jsonl"; }

fs::path prepare_run_dir(TrainConfig& c, int rank) {
  if (c.out.empty()) c.out = default_run_dir();
  const fs::path dir(c.out);
  const fs::path latest = checkpoint_path(dir);
  RINGLET_CHECK(!c.resume || fs::exists(latest), ValueError, "--resume: ", latest.string(),
                " does not exist (train without --resume to start a new run)");
  if (rank == 0 && c.reset) {  // start over: the old run's checkpoint and metrics go
    fs::remove(latest);
    fs::remove(metrics_path(dir));
  }
  if (rank == 0) {
    fs::create_directories(dir);
    std::ofstream(dir / "config.json") << c.to_json().dump(2) << "\n";
  }
  return dir;
}

}  // namespace ringlet::trainer
