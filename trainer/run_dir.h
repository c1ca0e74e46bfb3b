// The run directory of `ringlet train`:
//   config.json             the run's current recipe (replaced atomically)
//   metrics.jsonl           one JSON record per finished epoch, appended in whole lines (its
//                           "ranks": each rank's mean step split, rank_times.h)
//   steps.jsonl             one record every log_every steps (loss, lr, grad norm, images/s)
//   checkpoint.safetensors  after the last finished epoch (checkpoint/checkpoint.h, atomic)
//   trace/                  trace.rank<R>.json of the steps trace_steps traced (step_trace.h)
//   report.html             what `ringlet report` wrote last
//   history.jsonl           one record per command that trained the run: when, where, the
//                           command line, new / reset / resume / fork, and what it changed
//   lock                    held by the job's rank 0 while it runs (run_lock.h)
// Rank 0 alone writes there; every rank reads the checkpoint to resume. A kill at any moment
// leaves a directory that --resume accepts: metrics and steps records written after the last
// checkpoint (and a torn last line) are dropped when the run resumes.
#pragma once

#include <filesystem>
#include <iosfwd>
#include <memory>
#include <string>
#include <vector>

#include "trainer/config.h"
#include "trainer/resume_check.h"
#include "trainer/run_lock.h"

namespace ringlet::trainer {

// runs/<local date-time>, with a suffix (-2, -3, ...) when that directory exists already.
std::string default_run_dir();
// run_dir/metrics.jsonl
std::filesystem::path metrics_path(const std::filesystem::path& run_dir);
// run_dir/steps.jsonl
std::filesystem::path steps_path(const std::filesystem::path& run_dir);
// run_dir/report.html
std::filesystem::path report_path(const std::filesystem::path& run_dir);
// Where a resume reads its checkpoint: resume_from (a fork) or the run directory itself.
std::filesystem::path resume_source(const TrainConfig& config);
// Whether the config continues a run (--resume, or --resume_from for a fork).
bool resuming(const TrainConfig& config);

struct RunDir {
  std::filesystem::path path;
  std::unique_ptr<RunLock> lock;      // rank 0's, held for the run
  std::vector<RecipeChange> changes;  // what a resume changed in the run's recipe
  bool from_checkpoint = false;       // a resume with a checkpoint to load
  bool made_here = false;             // rank 0 made it a run just now: it was missing or empty
};

// Sets config.out to default_run_dir() when it is empty and makes the directory ready:
//  - a resume checks the command against the run's recipe (resume_check.h), on every rank;
//  - rank 0 locks it, refuses a used directory without --resume or --reset, discards the old
//    run for --reset, copies the source's record for a fork, drops metrics and steps records
//    newer than the checkpoint, then writes config.json and the history record.
// Nothing is written before every check has passed.
RunDir prepare_run_dir(TrainConfig& config, int rank, std::ostream& out);

// <run dir>/store: where `ringlet status RUN_DIR` finds the job's store while it trains. Rank 0
// writes the address (when there is one) and removes the file when training ends either way.
class StoreNote {
 public:
  StoreNote(const std::filesystem::path& run_dir, const std::string& address);
  ~StoreNote();
  StoreNote(const StoreNote&) = delete;
  StoreNote& operator=(const StoreNote&) = delete;

 private:
  std::filesystem::path path_;  // empty: none written
};
std::filesystem::path store_note_path(const std::filesystem::path& run_dir);

// A start that failed before training (data, model, devices): a directory prepare_run_dir made
// a run just now gets its files (config.json, history.jsonl, lock) removed, and itself when it
// is empty then, so that it does not look used. Anything else is left as it is.
void undo_new_run_dir(RunDir& dir);

}  // namespace ringlet::trainer
