// torchrun's per-rank log files: the layout, and the flags that choose the streams.
#include "distributed/launch/worker_logs.h"

#include <cstdio>

#include "core/error.h"
#include "core/random.h"

namespace ringlet::distributed {

namespace fs = std::filesystem;

fs::path make_log_root(const fs::path& log_dir, const std::string& run_id) {
  char suffix[16];
  std::snprintf(suffix, sizeof suffix, "%08x", static_cast<unsigned>(core::random_u64()));
  const fs::path root = log_dir / (run_id + "_" + suffix);
  std::error_code ec;
  fs::create_directories(root, ec);
  RINGLET_CHECK(!ec, Error, "launch: cannot create the log directory ", root.string(), ": ",
                ec.message());
  return root;
}

WorkerLogs::WorkerLogs(const fs::path& root, int attempt, int workers, int tee, int redirects)
    : redirects_(redirects), files_(static_cast<std::size_t>(workers)) {
  const int wanted = tee | redirects;
  if (wanted == 0) return;
  for (int local = 0; local < workers; ++local) {
    const fs::path dir = root / ("attempt_" + std::to_string(attempt)) / std::to_string(local);
    std::error_code ec;
    fs::create_directories(dir, ec);
    RINGLET_CHECK(!ec, Error, "launch: cannot create the log directory ", dir.string(), ": ",
                  ec.message());
    for (int stream = 0; stream < 2; ++stream) {
      if ((wanted & bit(stream)) == 0) continue;
      const fs::path file = dir / (stream == 0 ? "stdout.log" : "stderr.log");
      auto out = std::make_unique<std::ofstream>(file);
      RINGLET_CHECK(out->good(), Error, "launch: cannot open the log file ", file.string());
      files_[static_cast<std::size_t>(local)][static_cast<std::size_t>(stream)] = std::move(out);
    }
  }
}

void WorkerLogs::write(int local, int stream, const std::string& line) {
  auto& file = files_[static_cast<std::size_t>(local)][static_cast<std::size_t>(stream)];
  if (file) *file << line << '\n';
}

void WorkerLogs::flush() {
  for (auto& pair : files_) {
    for (auto& file : pair) {
      if (file) file->flush();
    }
  }
}

}  // namespace ringlet::distributed
