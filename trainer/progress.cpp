// The progress bar, the progress lines and steps.jsonl (progress.h).
#include "trainer/progress.h"

#include <algorithm>
#include <iomanip>
#include <nlohmann/json.hpp>
#include <sstream>

#include "core/file_io.h"
#include "distributed/stragglers.h"
#include "trainer/tensorboard.h"

namespace ringlet::trainer {

namespace {

double seconds_between(std::chrono::steady_clock::time_point from,
                       std::chrono::steady_clock::time_point to) {
  return std::chrono::duration<double>(to - from).count();
}

}  // namespace

std::string format_seconds(double s) {
  const auto total = static_cast<long>(std::max(0.0, s));
  std::ostringstream out;
  out << total / 60 << ":" << std::setw(2) << std::setfill('0') << total % 60;
  return out.str();
}

Progress::Progress(std::ostream& out, ProgressOptions options)
    : out_(out), options_(std::move(options)) {}

void Progress::begin_epoch(int epoch, std::int64_t batches, std::int64_t done) {
  epoch_ = epoch;
  batches_ = batches;
  epoch_steps_ = done;
  epoch_loss_sum_ = 0;
  epoch_examples_ = 0;
  epoch_start_ = window_start_ = Clock::now();
  window_loss_sum_ = 0;
  window_examples_ = window_images_ = window_skipped_ = 0;
}

bool Progress::wants_grad_norm(std::int64_t epoch_step) const {
  return epoch_step % options_.log_every == 0 || epoch_step == batches_;
}

void Progress::step(const StepSample& sample) {
  ++epoch_steps_;
  ++steps_done_;
  window_images_ += sample.examples;
  if (sample.device) {
    window_device_.stream_ops += sample.device->stream_ops;
    window_device_.host_syncs += sample.device->host_syncs;
    window_device_.driver_allocs += sample.device->driver_allocs;
    ++window_device_steps_;
  }
  if (sample.skipped) {
    ++window_skipped_;
  } else {
    epoch_loss_sum_ += sample.loss * static_cast<double>(sample.examples);
    window_loss_sum_ += sample.loss * static_cast<double>(sample.examples);
    epoch_examples_ += sample.examples;
    window_examples_ += sample.examples;
  }
  if (options_.tty) draw_bar();
  if (epoch_steps_ % options_.log_every != 0 && epoch_steps_ != batches_) return;
  log_window(sample);
  window_start_ = Clock::now();
  window_loss_sum_ = 0;
  window_examples_ = window_images_ = window_skipped_ = 0;
  window_device_ = {};
  window_device_steps_ = 0;
}

void Progress::end_epoch() {
  if (options_.tty) out_ << "\n";
}

double Progress::eta_seconds() const {
  const double elapsed = seconds_between(started_, Clock::now());
  const std::int64_t left = (batches_ - epoch_steps_) +
                            static_cast<std::int64_t>(options_.epochs - epoch_ - 1) * batches_;
  return elapsed / static_cast<double>(std::max<std::int64_t>(1, steps_done_)) *
         static_cast<double>(left);
}

void Progress::draw_bar() {
  const double secs = std::max(seconds_between(epoch_start_, Clock::now()), 1e-9);
  const double rate = static_cast<double>(epoch_examples_) * options_.world / secs;
  out_ << "\repoch " << epoch_ + 1 << "/" << options_.epochs << " [" << epoch_steps_ << "/"
       << batches_ << "] loss " << std::fixed << std::setprecision(4)
       << epoch_loss_sum_ / std::max<double>(1, static_cast<double>(epoch_examples_)) << " "
       << std::setprecision(0) << rate << " img/s eta " << format_seconds(eta_seconds()) << "   "
       << std::flush;
}

void Progress::log_window(const StepSample& last) {
  const double secs = std::max(seconds_between(window_start_, Clock::now()), 1e-9);
  const double rate = static_cast<double>(window_images_) * options_.world / secs;
  // A window whose every step was skipped (f16 overflow) has no loss to report.
  const bool has_loss = window_examples_ > 0;
  const double loss = has_loss ? window_loss_sum_ / static_cast<double>(window_examples_) : 0.0;
  const double eta = eta_seconds();
  const double step_ms = last.step_ms;
  const auto straggler = distributed::find_straggler(last.waited_for_ms, step_ms);
  if (!options_.tty) {
    std::ostringstream line;  // one write: ranks' lines never interleave mid-line
    line << "epoch " << epoch_ + 1 << "/" << options_.epochs << " step " << epoch_steps_ << "/"
         << batches_ << std::fixed << std::setprecision(4);
    if (has_loss) {
      line << " loss " << loss;
    } else {
      line << " loss - (every step skipped)";
    }
    line << " lr " << std::setprecision(6) << last.lr;
    if (last.grad_norm) line << " grad_norm " << std::setprecision(4) << *last.grad_norm;
    if (last.loss_scale) line << " loss_scale " << std::setprecision(0) << *last.loss_scale;
    line << " " << std::setprecision(0) << rate << " img/s eta " << format_seconds(eta);
    if (window_device_steps_ > 0) {
      const double n = static_cast<double>(window_device_steps_);
      line << std::setprecision(1) << " | a step: " << window_device_.stream_ops / n
           << " stream ops, " << window_device_.host_syncs / n << " host syncs, "
           << window_device_.driver_allocs / n << " driver allocs";
    }
    if (straggler) line << " | " << distributed::straggler_text(*straggler, step_ms);
    line << "\n";
    out_ << line.str() << std::flush;
  }
  if (options_.events != nullptr) {
    if (has_loss) options_.events->scalar("train/loss", loss, last.step);
    options_.events->scalar("train/lr", last.lr, last.step);
    options_.events->scalar("train/images_per_s", rate, last.step);
    if (last.grad_norm) options_.events->scalar("train/grad_norm", *last.grad_norm, last.step);
    if (last.loss_scale) options_.events->scalar("train/loss_scale", *last.loss_scale, last.step);
  }
  if (options_.steps_file.empty()) return;
  nlohmann::json record{{"epoch", epoch_ + 1}, {"step", last.step}};
  record["loss"] = has_loss ? nlohmann::json(loss) : nlohmann::json(nullptr);
  record["lr"] = last.lr;
  record["images_per_s"] = rate;
  record["eta_s"] = eta;
  if (last.grad_norm) record["grad_norm"] = *last.grad_norm;
  if (last.loss_scale) {
    record["loss_scale"] = *last.loss_scale;
    record["skipped"] = window_skipped_;
  }
  if (window_device_steps_ > 0) {
    const double n = static_cast<double>(window_device_steps_);
    record["device_per_step"] = {{"stream_ops", window_device_.stream_ops / n},
                                 {"host_syncs", window_device_.host_syncs / n},
                                 {"driver_allocs", window_device_.driver_allocs / n}};
  }
  if (!last.waited_for_ms.empty()) {
    record["waited_for_ms"] = last.waited_for_ms;
    record["step_ms"] = step_ms;
    if (straggler) record["straggler"] = straggler->rank;
  }
  core::append_line(options_.steps_file, record.dump());
}

}  // namespace ringlet::trainer
