// The run directory: its name, its files, and what a new, resumed, reset or forked run does to
// it; see run_dir.h.
#include "trainer/run_dir.h"

#include <ostream>

#include "checkpoint/checkpoint.h"
#include "core/env.h"
#include "core/error.h"
#include "core/file_io.h"
#include "trainer/step_trace.h"
#include "trainer/usage_error.h"

namespace ringlet::trainer {
namespace fs = std::filesystem;
namespace {

using nlohmann::json;

fs::path history_path(const fs::path& dir) { return dir / "history.jsonl"; }

bool is_event_file(const fs::path& file) {
  return file.filename().string().rfind("events.out.tfevents.", 0) == 0;
}

// The files of a run that a new one would mix with or destroy: its checkpoint, its records
// (even a run killed in its first epoch has steps), its TensorBoard event files, its trace and
// its report.
std::vector<fs::path> run_files(const fs::path& dir) {
  std::vector<fs::path> found;
  std::error_code ec;
  if (fs::exists(checkpoint::checkpoint_path(dir), ec))
    found.push_back(checkpoint::checkpoint_path(dir));
  for (const fs::path& records : {metrics_path(dir), steps_path(dir)}) {
    const std::uintmax_t bytes = fs::file_size(records, ec);
    if (!ec && bytes > 0) found.push_back(records);
  }
  for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
    if (is_event_file(it->path())) found.push_back(it->path());
  }
  if (!fs::is_empty(trace_dir(dir), ec) && !ec) found.push_back(trace_dir(dir));
  if (fs::exists(report_path(dir), ec)) found.push_back(report_path(dir));
  return found;
}

// A new run (neither --resume nor --reset) needs an unused directory.
void refuse_used(const fs::path& dir) {
  const std::vector<fs::path> found = run_files(dir);
  if (found.empty()) return;
  std::string names;
  for (const fs::path& f : found) names += (names.empty() ? "" : ", ") + f.filename().string();
  throw UsageError(core::str(
      "run directory ", dir.string(), " already holds a run (", names,
      "): pass --resume to continue it, --reset to discard it and start over, or another --out"));
}

// --reset: the old run's checkpoint, records, event files, trace and report go (its history stays,
// and records the reset).
void discard_run(const fs::path& dir) {
  for (const fs::path& f : run_files(dir)) fs::remove_all(f);
}

// The records (metrics.jsonl or steps.jsonl) the checkpoint holds (of the epochs it finished,
// or of its steps: a checkpoint written inside an epoch), whole lines only: a record written
// after the last checkpoint (a kill between the two writes, or steps of the epoch it did not
// finish) or a torn last line is dropped.
void trim_records(const fs::path& path, std::int64_t epochs_done, std::int64_t steps_done,
                  std::ostream& out) {
  if (!fs::exists(path)) return;
  const std::string text = core::read_file_text(path);
  std::string kept;
  std::size_t dropped = 0, start = 0;
  while (start < text.size()) {
    const std::size_t end = text.find('\n', start);
    const std::string line = text.substr(start, end == std::string::npos ? end : end - start);
    const json record = json::parse(line, nullptr, /*allow_exceptions=*/false);
    const bool whole = end != std::string::npos && record.is_object() && record.contains("epoch") &&
                       record["epoch"].is_number_integer();
    const bool before_step = whole && record.contains("step") &&
                             record["step"].is_number_integer() &&
                             record["step"].get<std::int64_t>() <= steps_done;
    if (whole && (record["epoch"].get<std::int64_t>() <= epochs_done || before_step)) {
      kept += line + "\n";
    } else {
      ++dropped;
    }
    if (end == std::string::npos) break;
    start = end + 1;
  }
  if (dropped == 0) return;
  core::write_file_atomically(path, kept);
  out << path.string() << ": dropped " << dropped << " line(s) not covered by the checkpoint of "
      << "epoch " << epochs_done << ", step " << steps_done << " (written after it, or torn)"
      << std::endl;
}

// A fork starts as a copy of its source's record: metrics, steps and history.
void copy_record(const fs::path& from, const fs::path& to) {
  core::write_file_atomically(metrics_path(to), core::read_file_text(metrics_path(from)));
  if (fs::exists(steps_path(from))) {
    core::write_file_atomically(steps_path(to), core::read_file_text(steps_path(from)));
  }
  core::write_file_atomically(history_path(to), core::read_file_text(history_path(from)));
}

// This process's command line, as /proc/self/cmdline has it.
json command_line() {
  json args = json::array();
  const std::string text = core::read_file_text("/proc/self/cmdline");
  std::size_t start = 0;
  while (start < text.size()) {
    const std::size_t end = text.find('\0', start);
    args.push_back(text.substr(start, end - start));
    if (end == std::string::npos) break;
    start = end + 1;
  }
  std::error_code ec;  // the launcher starts its workers as /proc/self/exe: name the binary
  if (!args.empty() && args[0] == "/proc/self/exe")
    args[0] = fs::read_symlink(args[0], ec).string();
  return args;
}

// The history record of this command.
json history_record(const TrainConfig& c, std::int64_t from_epoch,
                    const std::vector<RecipeChange>& changes) {
  const char* action = !c.resume_from.empty() ? "fork"
                       : c.resume             ? "resume"
                       : c.reset              ? "reset"
                                              : "new";
  json record{{"time", local_time_now("%Y-%m-%dT%H:%M:%S%z")},
              {"holder", this_process_as_holder()},
              {"action", action},
              {"from_epoch", from_epoch},
              {"command", command_line()}};
  if (!c.resume_from.empty()) record["source"] = c.resume_from;
  const auto restart = core::env_int("RINGLET_RESTART_COUNT", 0, 0, 1000);
  if (restart > 0) record["restart"] = restart;
  json changed = json::object();
  for (const RecipeChange& change : changes) changed[change.key] = {change.before, change.after};
  if (!changed.empty()) record["changes"] = changed;
  return record;
}

// Rank 0, holding the lock: the directory's files before the run starts.
void ready_files(const TrainConfig& c, const fs::path& dir, const RunRecord* run,
                 const std::vector<RecipeChange>& changes, std::ostream& out) {
  if (c.reset) discard_run(dir);
  if (!c.reset && !c.resume) refuse_used(dir);  // a fork's --out too: it must be new
  if (!c.resume_from.empty() && !c.resume) copy_record(resume_source(c), dir);
  if (run != nullptr) {
    trim_records(metrics_path(dir), run->epoch, run->step, out);
    trim_records(steps_path(dir), run->epoch, run->step, out);
  }
  core::write_file_atomically(dir / "config.json", c.to_json().dump(2) + "\n");
  core::append_line(history_path(dir),
                    history_record(c, run != nullptr ? run->epoch : 0, changes).dump());
}

}  // namespace

std::string default_run_dir() {
  const std::string name = "runs/" + local_time_now("%Y%m%d-%H%M%S");
  std::string dir = name;
  for (int suffix = 2; fs::exists(dir) && suffix < 1000; ++suffix)
    dir = core::str(name, "-", suffix);
  return dir;
}

fs::path metrics_path(const fs::path& run_dir) { return run_dir / "metrics.jsonl"; }

fs::path steps_path(const fs::path& run_dir) { return run_dir / "steps.jsonl"; }

fs::path report_path(const fs::path& run_dir) { return run_dir / "report.html"; }

bool resuming(const TrainConfig& c) { return c.resume || !c.resume_from.empty(); }

fs::path resume_source(const TrainConfig& c) {
  return c.resume_from.empty() ? fs::path(c.out) : fs::path(c.resume_from);
}

RunDir prepare_run_dir(TrainConfig& c, int rank, std::ostream& out) {
  if (c.out.empty()) c.out = default_run_dir();
  RunDir result;
  result.path = c.out;
  std::optional<RunRecord> run;
  if (resuming(c)) {
    run = read_run_record(resume_source(c));
    result.changes = check_resume_changes(*run, c);
    result.from_checkpoint = run->has_checkpoint;
    if (!result.changes.empty()) {
      out << "resume: " << describe(result.changes) << " (the rest of the recipe is the run's)"
          << std::endl;
    }
    if (!run->has_checkpoint) {
      out << "no checkpoint yet in " << resume_source(c).string()
          << " (the run stopped in its first epoch): it starts over from epoch 0" << std::endl;
    }
  }
  if (rank != 0) return result;
  std::error_code ec;
  result.made_here = !resuming(c) && (!fs::exists(result.path) || fs::is_empty(result.path, ec));
  fs::create_directories(result.path);
  result.lock = std::make_unique<RunLock>(result.path);
  if (!result.lock->stale_holder().empty()) {
    out << "run directory " << result.path.string() << ": the job that held it ("
        << result.lock->stale_holder() << ") is gone; its lock is taken over" << std::endl;
  }
  ready_files(c, result.path, run ? &*run : nullptr, result.changes, out);
  // A writer killed mid-write leaves its temporary file; the lock says none is alive now.
  // (After ready_files, which refuses a directory this command may not use.)
  const auto leftovers = core::remove_temporaries(result.path);
  if (!leftovers.empty()) {
    out << "run directory " << result.path.string() << ": removed " << leftovers.size()
        << " temporary file(s) of a write that was interrupted (" << leftovers.front()
        << (leftovers.size() > 1 ? ", ..." : "") << ")" << std::endl;
  }
  return result;
}

std::filesystem::path store_note_path(const std::filesystem::path& run_dir) {
  return run_dir / "store";
}

StoreNote::StoreNote(const std::filesystem::path& run_dir, const std::string& address) {
  if (address.empty()) return;
  core::write_file_atomically(store_note_path(run_dir), address + "\n");
  path_ = store_note_path(run_dir);
}

StoreNote::~StoreNote() {
  std::error_code ec;
  if (!path_.empty()) fs::remove(path_, ec);
}

void undo_new_run_dir(RunDir& dir) {
  if (!dir.made_here) return;
  std::error_code ec;
  for (const char* file : {"config.json", "history.jsonl"}) fs::remove(dir.path / file, ec);
  dir.lock.reset();  // releases it; the file goes next
  fs::remove(dir.path / "lock", ec);
  fs::remove(dir.path, ec);  // only when nothing else is in it
}

}  // namespace ringlet::trainer
