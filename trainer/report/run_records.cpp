// read_run_records: the files of run_dir.h, read for a report (never written).
#include "trainer/report/run_records.h"

#include <string>

#include "core/error.h"
#include "core/file_io.h"
#include "trainer/run_dir.h"

namespace ringlet::trainer::report {

namespace fs = std::filesystem;
using nlohmann::json;

std::vector<json> read_json_lines(const fs::path& path) {
  std::vector<json> records;
  const std::string text = core::read_file_text(path);  // "" when there is none
  std::size_t start = 0;
  for (int line = 1; start < text.size(); ++line) {
    const std::size_t end = text.find('\n', start);
    if (end == std::string::npos) break;  // a torn last line: being written, or cut by a kill
    const std::string body = text.substr(start, end - start);
    start = end + 1;
    if (body.empty()) continue;
    json record = json::parse(body, nullptr, /*allow_exceptions=*/false);
    RINGLET_CHECK(record.is_object(), Error, path.string(), ":", line,
                  ": not a JSON record: ", body.substr(0, 80));
    records.push_back(std::move(record));
  }
  return records;
}

RunRecords read_run_records(const fs::path& dir) {
  std::error_code ec;
  RINGLET_CHECK(fs::is_directory(dir, ec), Error, "report: '", dir.string(),
                "' is not a directory");
  const fs::path config = dir / "config.json";
  RINGLET_CHECK(fs::exists(config, ec), Error, "report: '", dir.string(),
                "' is not a run directory (it has no config.json; `ringlet train --out DIR` "
                "makes one)");
  RunRecords run;
  run.dir = dir;
  run.config = json::parse(core::read_file_text(config), nullptr, /*allow_exceptions=*/false);
  RINGLET_CHECK(run.config.is_object(), Error, config.string(), ": not a JSON object");
  run.epochs = read_json_lines(metrics_path(dir));
  run.steps = read_json_lines(steps_path(dir));
  run.history = read_json_lines(dir / "history.jsonl");
  return run;
}

}  // namespace ringlet::trainer::report
