// What a training run says while an epoch trains. On a TTY: a bar redrawn in place (the
// epoch's mean loss so far, images/s and the run's ETA). Otherwise, every log_every steps and
// at an epoch's end: a line with the window's mean loss, the lr, the gradient norm, images/s,
// the loss scale (f16) and the run's ETA. Each such window is also a record in the run
// directory's steps.jsonl (rank 0), whatever the terminal, and TensorBoard scalars
// (train/loss, train/lr, train/grad_norm, train/images_per_s, train/loss_scale) at that step:
//   {"epoch": 3, "step": 1138, "loss": 0.71, "lr": 0.098, "grad_norm": 1.9,
//    "images_per_s": 4263, "eta_s": 612.4}                 (+ "loss_scale", "skipped" on f16)
// With several ranks (eager DDP steps), both also say per rank how long the others waited for it
// at the gradient all-reduces ("waited_for_ms", ms per step), and the line names a rank that
// keeps them waiting more than 20% of the step ("straggler": its rank in the record).
// "epoch" is the epoch in progress (1-based), so a resume drops the records of an epoch its
// checkpoint does not hold (run_dir.h). The ETA is the steps left at this command's rate. On a
// device both also say what a step queued and waited for, on average over the window:
//   "device_per_step": {"stream_ops": 68, "host_syncs": 1, "driver_allocs": 0}
// (device/counters.h). Each step's loss is read one step late, when the next step has
// been queued, so a window's line comes one step after its last step.
#pragma once

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <optional>
#include <ostream>
#include <string>
#include <vector>

#include "device/counters.h"

namespace ringlet::trainer {

class EventWriter;  // trainer/tensorboard.h

// "m:ss" (minutes may exceed 59: "75:02").
std::string format_seconds(double seconds);

struct ProgressOptions {
  int epochs = 1;
  int world = 1;       // ranks: images/s counts every rank's examples
  int log_every = 50;  // steps between lines and records
  bool tty = false;
  std::filesystem::path steps_file;  // empty: no records (ranks other than 0)
  EventWriter* events = nullptr;     // TensorBoard: the records' values as train/* scalars
};

// One optimizer step as the progress sees it.
struct StepSample {
  std::int64_t step = 0;  // optimizer steps of the run so far, this one included
  bool skipped = false;   // f16 overflow: no loss counted
  double loss = 0;
  std::int64_t examples = 0;  // this rank's
  double lr = 0;
  std::optional<double> grad_norm;   // measured on the steps wants_grad_norm() names
  std::optional<double> loss_scale;  // f16
  // On a device: what the step queued and waited for (device/counters.h).
  std::optional<device::DeviceCounts> device;
  // On a window's last step with several ranks: per rank, how long (ms per step, over the
  // window) the earliest rank waited for it at the gradient all-reduces (distributed/
  // stragglers.h).
  std::vector<double> waited_for_ms;
  double step_ms = 0;  // with them: the ranks' mean step over the window
};

class Progress {
 public:
  Progress(std::ostream& out, ProgressOptions options);

  // `done`: batches of it trained before (a run resumed inside the epoch).
  void begin_epoch(int epoch, std::int64_t batches, std::int64_t done = 0);
  // Whether the epoch's step `epoch_step` (1-based) ends a window (its gradient norm is then
  // worth measuring).
  bool wants_grad_norm(std::int64_t epoch_step) const;
  void step(const StepSample& sample);
  void end_epoch();

 private:
  using Clock = std::chrono::steady_clock;
  void draw_bar();
  void log_window(const StepSample& last);
  double eta_seconds() const;

  std::ostream& out_;
  ProgressOptions options_;
  Clock::time_point started_ = Clock::now();  // this command's first step
  std::int64_t steps_done_ = 0;               // by this command
  int epoch_ = 0;
  std::int64_t batches_ = 0, epoch_steps_ = 0;
  double epoch_loss_sum_ = 0;
  std::int64_t epoch_examples_ = 0;
  Clock::time_point epoch_start_;
  // the window since the last line or record
  double window_loss_sum_ = 0;
  // Examples of the window's steps that counted (not skipped), and of all its steps.
  std::int64_t window_examples_ = 0, window_images_ = 0, window_skipped_ = 0;
  // A device's counts over the window's steps, and how many steps had them.
  device::DeviceCounts window_device_;
  std::int64_t window_device_steps_ = 0;
  Clock::time_point window_start_;
};

}  // namespace ringlet::trainer
