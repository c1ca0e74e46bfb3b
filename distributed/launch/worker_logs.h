// Per-rank log files of `ringlet launch`, as torchrun's --log-dir, --tee and --redirects write
// them: <log_dir>/<run_id>_<random>/attempt_<k>/<local_rank>/{stdout,stderr}.log. A stream named
// by `tee` goes to its file and to the console; one named by `redirects` to its file only.
#pragma once

#include <array>
#include <filesystem>
#include <fstream>
#include <memory>
#include <string>
#include <vector>

namespace ringlet::distributed {

// Stream bits, as torchrun's Std: 1 stdout, 2 stderr, 3 both.
constexpr int kStdout = 1, kStderr = 2;

// <log_dir>/<run_id>_<8 random hex digits>, created (with its parents).
std::filesystem::path make_log_root(const std::filesystem::path& log_dir,
                                    const std::string& run_id);

class WorkerLogs {
 public:
  // No files when both tee and redirects are 0. Creates attempt_<attempt>/<local>/ under root
  // for each of the `workers` local ranks; core::Error naming the file when one cannot be opened.
  WorkerLogs(const std::filesystem::path& root, int attempt, int workers, int tee, int redirects);

  // stream 0 = stdout, 1 = stderr (as WorkerProcess::fd).
  bool shown(int stream) const { return (redirects_ & bit(stream)) == 0; }
  void write(int local, int stream, const std::string& line);
  void flush();

 private:
  static int bit(int stream) { return stream == 0 ? kStdout : kStderr; }
  int redirects_;
  std::vector<std::array<std::unique_ptr<std::ofstream>, 2>> files_;
};

}  // namespace ringlet::distributed
