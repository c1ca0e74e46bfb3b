// Training loop: see train.h. The data order of epoch e depends only on (seed, e), so a run
// resumed after epoch e sees exactly the batches the uninterrupted run would have seen.
// train() reads as its steps: set up a Run (directory, data, model, optimizer, precision,
// resume, DDP), then per epoch a training pass, an evaluation and the epoch's record.
#include "trainer/train.h"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <iomanip>
#include <nlohmann/json.hpp>
#include <optional>
#include <sstream>

#include "checkpoint/checkpoint.h"
#include "checkpoint/safetensors.h"
#include "core/env.h"
#include "core/file_io.h"
#include "core/thread_clocks.h"
#include "core/threads.h"
#include "device/counters.h"
#include "distributed/ddp.h"
#include "distributed/rank_times.h"
#include "distributed/stragglers.h"
#include "distributed/sync_batch_norm.h"
#include "nn/autocast.h"
#include "nn/clip_grad.h"
#include "nn/grad_scaler.h"
#include "nn/loss.h"
#include "nn/lr_schedule.h"
#include "tensor/device/late_reads.h"
#include "tensor/ops.h"
#include "trainer/dataset_catalog.h"
#include "trainer/finite_state.h"
#include "trainer/input_pipeline.h"
#include "trainer/progress.h"
#include "trainer/recipe_parts.h"
#include "trainer/run_dir.h"
#include "trainer/schedule_resume.h"
#include "trainer/step_graph.h"
#include "trainer/step_trace.h"
#include "trainer/stop_vote.h"
#include "trainer/tensorboard.h"
#include "transport/job_footprint.h"

namespace ringlet::trainer {
namespace fs = std::filesystem;
namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

// Discards everything: the output of ranks other than 0.
class NullBuffer : public std::streambuf {
 protected:
  int overflow(int c) override { return c; }
};

// --- the run: its state, set up step by step, then trained epoch by epoch ---------------------

// Everything one rank's run holds between its steps.
struct Run {
  Run(TrainConfig config, std::ostream& all_out, collectives::Communicator* communicator,
      collectives::BufferSpace* device_space)
      : c(std::move(config)),
        comm(communicator),
        space(device_space),
        rank(comm != nullptr ? comm->rank() : 0),
        world(comm != nullptr ? comm->size() : 1),
        null_out(&null_buffer),
        out(rank == 0 ? all_out : null_out),
        tty(::isatty(STDOUT_FILENO) != 0),
        precision(precision_of(c)),
        scaler(nn::GradScalerOptions{.enabled = precision == core::DType::f16}),
        criterion(tensor::Reduction::mean, c.label_smoothing) {}

  TrainConfig c;
  collectives::Communicator* comm;
  collectives::BufferSpace* space;  // the device's, for DDP on a device
  int rank, world;
  NullBuffer null_buffer;
  std::ostream null_out;
  std::ostream& out;  // rank 0: the caller's stream; other ranks: null_out
  bool tty;           // a progress bar instead of progress lines
  RunDir run_dir;     // its path, rank 0's lock, what a resume changed
  std::unique_ptr<data::DataLoader> train_loader, test_loader;
  std::shared_ptr<nn::Module> model;
  std::unique_ptr<nn::Optimizer> optimizer;
  std::unique_ptr<nn::LRScheduler> schedule;  // null: a constant lr
  // Mixed precision: the layers compute on rounded values (nn/autocast.h); f16 scales the
  // loss and skips the steps whose gradients overflow, as torch.cuda.amp does. Under DDP every
  // rank sees the same averaged gradients, so all of them skip the same steps.
  core::DType precision;
  nn::GradScaler scaler;
  nn::CrossEntropyLoss criterion;
  std::unique_ptr<distributed::DistributedDataParallel> ddp;  // null on a single rank
  distributed::WaitTally waits;         // DDP's gradient sync waits over the log window
  std::unique_ptr<Progress> progress;   // while the epochs train
  std::unique_ptr<EventWriter> events;  // rank 0: TensorBoard's event file
  std::unique_ptr<StepTrace> trace;     // trace_steps (or RINGLET_TRACE)
  int start_epoch = 0;
  // A resume inside epoch start_epoch: the batches of it already trained and their sums.
  std::int64_t start_batch = 0;
  nn::NamedState resumed_sums;
  std::int64_t step = 0;  // optimizer steps taken, skipped ones included
  core::Device device;    // where the model computes (batches are moved there)
  // Each step's loss, read one step late (a device's step then waits for nothing new).
  tensor::LateReads late_losses;
  std::unique_ptr<StepGraph> graph;  // --cuda_graph: the step captured and replayed
  StopRequest stop_request;          // SIGTERM, SIGINT, SIGUSR1: stop at the next step
  std::unique_ptr<StopVote> vote;    // the ranks' agreement on it
};

// Several local ranks share the cores unless --threads says otherwise.
void share_cores(const Run& run) {
  if (run.c.threads > 0) {
    core::set_num_threads(run.c.threads);
  } else if (run.world > 1) {
    const auto local_ranks = core::env_int("LOCAL_WORLD_SIZE", run.world, 1, 1024);
    core::set_num_threads(std::max<int>(1, core::num_threads() / static_cast<int>(local_ranks)));
  }
}

// Training batches are shuffled (DistributedSampler shards under several ranks) and
// augmented as the config says; each rank evaluates its own shard of the test set.
void make_loaders(Run& run) {
  run.train_loader = make_train_loader(run.c, run.rank, run.world);
  run.test_loader = make_test_loader(run.c, run.rank, run.world);
}

// The model, its optimizer and schedule, and what the run prints about them.
void set_up_model(Run& run) {
  run.model = build_model(run.c);
  run.model->train();
  run.optimizer = make_optimizer(run.c, *run.model);
  run.schedule = make_schedule(run.c, *run.optimizer);
  run.out << run.model->summary();
  if (run.world > 1) run.out << "data parallel over " << run.world << " ranks" << std::endl;
  if (run.precision != core::DType::f32) {
    run.out << "mixed precision: " << run.c.precision
            << " inputs to Linear and Conv2d, f32 accumulation"
            << (run.scaler.is_enabled() ? ", dynamic loss scaling" : "") << std::endl;
  }
}

// A checkpoint with NaN or an infinity anywhere (the model, or the optimizer's state, which
// the next step would spread) cannot be resumed: the run had diverged, or the file is damaged.
void refuse_non_finite(const Run& run, const fs::path& checkpoint) {
  std::string bad = first_non_finite(*run.model);
  if (bad.empty()) bad = first_non_finite(*run.optimizer);
  RINGLET_CHECK(bad.empty(), ValueError, "checkpoint ", checkpoint.string(),
                " holds NaN or infinite values in ", bad,
                ": it cannot be resumed (the run had diverged, or the file is damaged); fork an "
                "earlier run with --resume_from DIR --out NEW, where --lr may change");
}

// Parameters, optimizer and schedule state, loss scale and position of the last checkpoint:
// the end of an epoch, or a step inside one (a preempted run).
void resume(Run& run) {
  const fs::path latest = checkpoint::checkpoint_path(resume_source(run.c));
  const checkpoint::CheckpointInfo info =
      checkpoint::load_checkpoint(latest, *run.model, run.optimizer.get());
  refuse_non_finite(run, latest);
  run.start_epoch = static_cast<int>(info.epoch);
  run.start_batch = info.batches;
  run.resumed_sums = info.epoch_sums;
  run.step = info.step;
  const std::string schedule_note =
      resume_schedule(run.c, run.run_dir.changes, info, *run.optimizer, run.schedule);
  if (run.scaler.is_enabled() && !info.scaler.empty()) run.scaler.load_state_dict(info.scaler);
  run.out << "resumed from " << latest.string() << " after epoch " << run.start_epoch;
  if (run.start_batch > 0) {
    run.out << " and " << run.start_batch << " batch(es) of epoch " << run.start_epoch + 1;
  }
  run.out << std::endl;
  if (!schedule_note.empty()) run.out << schedule_note << std::endl;
  if (run.start_epoch >= run.c.epochs) {
    run.out << "the run has finished its " << run.c.epochs
            << " epochs: nothing to train (pass a larger --epochs to continue it)" << std::endl;
  }
}

// After the resume (checkpoints load into host tensors): parameters and buffers move to the
// device in place, so the optimizer keeps them; its state follows on the first step.
void place_on_device(Run& run) {
  run.device = core::parse_device(run.c.device);
  if (run.device.is_cpu()) return;
  run.model->to(run.device);
  run.out << "device: " << run.device << std::endl;
}

// After the resume, so that every rank starts from the loaded (equal) parameters.
void distribute(Run& run) {
  if (run.c.sync_bn) {
    const int layers = distributed::convert_sync_batchnorm(*run.model, *run.comm);
    run.out << "SyncBatchNorm: " << layers << " BatchNorm layer(s) use the global batch statistics"
            << std::endl;
  }
  // The loop never keeps a .grad past the optimizer step, so the gradients may live in DDP's
  // buckets (no copy back after each all-reduce).
  RINGLET_CHECK(run.device.is_cpu() || run.space != nullptr, DeviceError, "training on ",
                run.device, " with several ranks needs the device's space");
  run.ddp = std::make_unique<distributed::DistributedDataParallel>(
      run.model, *run.comm,
      distributed::DDPOptions{.device_space = run.device.is_cpu() ? nullptr : run.space,
                              .gradient_as_bucket_view = true,
                              .comm_hook = distributed::parse_comm_hook(run.c.comm_hook)});
  if (run.c.comm_hook != "none") {
    run.out << "DDP comm hook: " << run.c.comm_hook << " (buckets all-reduced in half precision)"
            << std::endl;
  }
}

// Unscales, clips or measures the gradient norm when asked, and steps (or skips on an f16
// overflow), filling what the progress sees of it.
void optimizer_step(Run& run, StepSample& sample, bool measure_norm) {
  if (run.c.clip_grad_norm > 0 || measure_norm) {
    run.scaler.unscale_(*run.optimizer);  // the clip and the norm see the true gradients
  }
  if (run.c.clip_grad_norm > 0) {
    sample.grad_norm = nn::clip_grad_norm_(run.model->parameters(), run.c.clip_grad_norm);
  } else if (measure_norm) {
    sample.grad_norm = nn::grad_norm(run.model->parameters());
  }
  if (run.scaler.is_enabled()) sample.loss_scale = run.scaler.get_scale();
  sample.skipped = !run.scaler.step(*run.optimizer);
  run.scaler.update();
}

// One optimizer step on one batch, as the progress sees it: its loss, or skipped when the f16
// gradients overflowed (the scale shrank, nothing was learned); the gradient norm when asked
// (after DDP's averaging, unscaled) or when clipping measured it.
// One step as a graph replays it (or runs it eagerly while warming up): no tracing, no DDP, no
// loss scaling or clipping (StepGraph::unsupported); the gradient norm read after it, when
// asked.
StepSample graph_step(Run& run, const data::Batch& batch, bool measure_norm) {
  StepSample sample;
  sample.examples = batch.labels.numel();
  sample.lr = run.optimizer->lr();
  const tensor::Tensor loss = run.graph->step(batch.images, batch.labels);
  if (measure_norm) sample.grad_norm = nn::grad_norm(run.model->parameters());
  sample.step = ++run.step;
  run.late_losses.push(loss);
  return sample;
}

// The graph's work: one whole step on device inputs, its loss not read. With several ranks,
// DDP's buffer broadcast and bucket all-reduces are captured with it (device flags).
void set_up_graph(Run& run) {
  run.graph = std::make_unique<StepGraph>(
      run.device, *run.optimizer,
      [&run](const tensor::Tensor& images, const tensor::Tensor& labels) {
        run.optimizer->zero_grad();
        tensor::Tensor logits;
        {
          nn::Autocast amp(run.precision);
          logits = run.ddp ? run.ddp->forward(images) : run.model->forward(images);
        }
        tensor::Tensor loss = run.criterion.forward(logits, labels);
        loss.backward();  // with DDP, its all-reduces finish here
        run.optimizer->step();
        return loss;
      });
}

StepSample train_step(Run& run, const data::Batch& batch, bool measure_norm) {
  if (run.graph) return graph_step(run, batch, measure_norm);
  collectives::Tracer* tracer = run.trace->tracer();
  const collectives::TraceScope step_span(tracer, "step", "step", run.step + 1);
  run.optimizer->zero_grad();
  tensor::Tensor loss;
  {
    const collectives::TraceScope span(tracer, "forward", "forward");
    tensor::Tensor logits;
    {
      nn::Autocast amp(run.precision);
      const tensor::Tensor images = batch.images.to(run.device);
      logits = run.ddp ? run.ddp->forward(images) : run.model->forward(images);
    }
    loss = run.criterion.forward(logits, batch.labels.to(run.device));
  }
  {
    // With DDP, backward ends waiting for its all-reduces (the trace's gradient sync wait).
    const collectives::TraceScope span(tracer, "backward", "backward");
    run.scaler.scale(loss).backward();
  }
  StepSample sample;
  sample.examples = batch.labels.numel();
  sample.lr = run.optimizer->lr();
  {
    const collectives::TraceScope span(tracer, "optimizer", "optimizer");
    optimizer_step(run, sample, measure_norm);
  }
  sample.step = ++run.step;
  run.late_losses.push(loss);  // read by the next step (finish_sample)
  return sample;
}

// DDP's wait for the step's gradient all-reduces, and at a window's end every rank's share of
// the others' waiting (distributed/stragglers.h). A graph's step waits inside the replay: none.
void tally_waits(Run& run, bool window_end, double step_ms, StepSample& sample) {
  if (!run.ddp || run.graph) return;
  run.waits.add(run.ddp->last_sync_wait(), step_ms);
  if (window_end) {
    const distributed::Waits waits =
        run.waits.waited_for(run.comm, core::Deadline::after(run.comm->timeout()));
    sample.waited_for_ms = waits.waited_for_ms;
    sample.step_ms = waits.step_ms;
  }
}

// A step's sample with its loss, read one step late.
StepSample finish_sample(Run& run, StepSample sample) {
  const double loss = run.late_losses.pop();
  if (!sample.skipped) sample.loss = loss;
  return sample;
}

// One epoch's training pass, as its summary line and metrics record need it.
struct EpochStats {
  double loss_sum = 0;       // over the examples of steps that were not skipped
  std::int64_t seen = 0;     // those examples
  std::int64_t steps = 0;    // batches, skipped ones included
  std::int64_t skipped = 0;  // steps skipped on overflow (f16)
  double seconds = 0;
  std::vector<core::TimeSplit> splits;  // where each step went on this rank, data wait included
  std::int64_t batches = 0;             // the epoch's
  bool stopped = false;                 // the ranks agreed to stop before its end
  double mean_loss() const { return loss_sum / std::max<double>(1, static_cast<double>(seen)); }
  bool finished() const { return steps == batches; }

  // The sums a mid-epoch checkpoint keeps (its "epoch_sums"), and back.
  nn::NamedState sums() const {
    nn::NamedState state;
    state.set("loss_sum", loss_sum);
    state.set("seen", static_cast<double>(seen));
    state.set("steps", static_cast<double>(steps));
    state.set("skipped", static_cast<double>(skipped));
    state.set("seconds", seconds);
    return state;
  }
  void add_sums(const nn::NamedState& state) {
    if (state.empty()) return;
    loss_sum += state.scalar("loss_sum");
    seen += static_cast<std::int64_t>(state.scalar("seen"));
    steps += static_cast<std::int64_t>(state.scalar("steps"));
    skipped += static_cast<std::int64_t>(state.scalar("skipped"));
    seconds += state.scalar("seconds");
  }
};

// What to try after a divergence: the learning rate, unless the input normalization alone puts
// pixels (in [0, 1]) far outside the range a network trains in.
bool runs_on_device(collectives::Algorithm algorithm) {
  return algorithm == collectives::Algorithm::one_shot ||
         algorithm == collectives::Algorithm::two_shot;
}

std::string divergence_hint(const TrainConfig& c) {
  double reach = 0;
  for (std::size_t k = 0; k < c.mean.size(); ++k) {
    const double s = c.std.size() == c.mean.size() ? c.std[k] : c.std.empty() ? 1.0 : c.std[0];
    reach = std::max({reach, std::abs(c.mean[k]) / s, std::abs(1 - c.mean[k]) / s});
  }
  if (reach > 1e4) {
    const auto list = [](const std::vector<double>& values) {
      std::string text;
      for (const double v : values) text += (text.empty() ? "" : ",") + core::str(v);
      return text;
    };
    return core::str("diverged: --mean ", list(c.mean), " and --std ", list(c.std),
                     " normalize pixels to magnitudes ",
                     std::isfinite(reach) ? core::str("up to ", reach) : "past double's range",
                     "; check them");
  }
  return "diverged; try a smaller --lr";
}

// The next batch, the wait for it traced as "data".
std::optional<data::Batch> next_batch(Run& run, data::EpochIterator& epoch) {
  const collectives::TraceScope span(run.trace->tracer(), "data", "data");
  return epoch.next();
}

// A step whose loss has come back: the epoch's sums and the progress.
void count_step(Run& run, int epoch, const StepSample& sample, EpochStats& stats) {
  if (sample.skipped) {
    ++stats.skipped;
  } else {
    RINGLET_CHECK(std::isfinite(sample.loss), Error, "epoch ", epoch + 1, " step ", sample.step,
                  ": the loss is ", sample.loss, " (", divergence_hint(run.c), ")");
    stats.loss_sum += sample.loss * static_cast<double>(sample.examples);
    stats.seen += sample.examples;
  }
  run.progress->step(sample);
}

// Each step is counted when the next one has been queued (its loss read one step late), the
// epoch's last once the loop ends. A resumed run's first epoch starts at the checkpoint's batch
// with its sums; the ranks' stop vote may end the pass after any step.
EpochStats train_epoch(Run& run, int epoch) {
  const auto start = Clock::now();
  EpochStats stats;
  if (epoch == run.start_epoch) stats.add_sums(run.resumed_sums);
  const std::int64_t first = epoch == run.start_epoch ? run.start_batch : 0;
  auto it = run.train_loader->begin_epoch(epoch, first);
  stats.batches = it.num_batches();
  run.progress->begin_epoch(epoch, it.num_batches(), first);
  std::optional<StepSample> pending;
  core::ThreadClocks before = core::ThreadClocks::now();  // a step's start: the last one's end
  for (;;) {
    auto batch = next_batch(run, it);
    if (!batch) break;
    const device::DeviceCounts counts = device::device_counts(run.device);
    const bool window_end = run.progress->wants_grad_norm(stats.steps + 1);
    StepSample sample = train_step(run, *batch, window_end);
    if (pending) count_step(run, epoch, finish_sample(run, *pending), stats);
    if (!run.device.is_cpu()) sample.device = device::device_counts(run.device) - counts;
    run.trace->end_step();
    ++stats.steps;
    const core::ThreadClocks after = core::ThreadClocks::now();
    stats.splits.push_back(core::split_between(before, after));
    before = after;
    tally_waits(run, window_end, stats.splits.back().wall_ms, sample);
    pending = sample;
    if (run.vote->after_step()) {
      stats.stopped = true;
      break;
    }
  }
  if (pending) count_step(run, epoch, finish_sample(run, *pending), stats);
  run.progress->end_epoch();
  stats.seconds += seconds_since(start);
  return stats;
}

// What a checkpoint after `epochs_done` epochs (and `batches` of the next, with their sums)
// holds besides the tensors.
checkpoint::CheckpointInfo checkpoint_info(const Run& run, int epochs_done,
                                           std::int64_t batches = 0,
                                           nn::NamedState epoch_sums = {}) {
  return checkpoint::CheckpointInfo{
      .epoch = epochs_done,
      .step = run.step,
      .config = run.c.to_json().dump(),
      .scaler = run.scaler.is_enabled() ? run.scaler.state_dict() : nn::NamedState{},
      .schedule = run.schedule ? run.schedule->state_dict() : nn::NamedState{},
      .batches = batches,
      .epoch_sums = std::move(epoch_sums)};
}

// The epoch's summary line, its metrics.jsonl record and the checkpoint (rank 0 writes). Every
// rank calls it: the ranks' step splits are gathered here.
void record_epoch(Run& run, int epoch, const EpochStats& stats, double lr, const EvalResult& eval) {
  const std::vector<core::TimeSplit> ranks = distributed::gather_splits(
      run.comm, core::mean_split(stats.splits),
      core::Deadline::after(run.comm != nullptr ? run.comm->timeout() : std::chrono::minutes(1)));
  const double images_per_s =
      static_cast<double>(stats.seen) * run.world / std::max(stats.seconds, 1e-9);
  run.out << std::fixed << "epoch " << epoch + 1 << "/" << run.c.epochs << ": train loss "
          << std::setprecision(4) << stats.mean_loss() << ", test loss " << eval.loss
          << ", test accuracy " << eval.accuracy;
  if (run.c.tta == "flip") run.out << " (tta flip; " << eval.single_view_accuracy << " without)";
  run.out << ", " << std::setprecision(0) << images_per_s << " img/s, " << std::setprecision(1)
          << stats.seconds << " s";
  if (run.scaler.is_enabled()) {
    run.out << ", " << stats.skipped << " step(s) skipped on overflow, loss scale "
            << std::setprecision(0) << run.scaler.get_scale();
  }
  run.out << "; " << distributed::describe_splits(ranks) << std::endl;
  nlohmann::json record{{"epoch", epoch + 1},           {"step", run.step},
                        {"loss", stats.mean_loss()},    {"test_loss", eval.loss},
                        {"accuracy", eval.accuracy},    {"lr", lr},
                        {"images_per_s", images_per_s}, {"seconds", stats.seconds}};
  if (run.c.tta == "flip") record["accuracy_without_tta"] = eval.single_view_accuracy;
  if (run.scaler.is_enabled()) {
    record["skipped_steps"] = stats.skipped;
    record["loss_scale"] = run.scaler.get_scale();
  }
  if (run.rank != 0) return;
  for (const auto& [key, value] : record.items()) {
    if (key != "epoch" && key != "step")
      run.events->scalar("epoch/" + key, value.get<double>(), run.step);
  }
  record["ranks"] = distributed::splits_json(ranks);
  core::append_line(metrics_path(run.run_dir.path),
                    record.dump());  // before the checkpoint: see run_dir.h
  checkpoint::save_checkpoint(checkpoint::checkpoint_path(run.run_dir.path), *run.model,
                              run.optimizer.get(), checkpoint_info(run, epoch + 1));
}

// A run stopped inside epoch `epoch`: rank 0 writes a checkpoint at its last step, with the
// batches done and their sums, while the others wait. (No metrics record: the epoch goes on
// when the run is resumed.)
void save_stopped_epoch(Run& run, int epoch, const EpochStats& stats) {
  if (run.rank == 0) {
    checkpoint::save_checkpoint(checkpoint::checkpoint_path(run.run_dir.path), *run.model,
                                run.optimizer.get(),
                                checkpoint_info(run, epoch, stats.steps, stats.sums()));
  }
  if (run.comm != nullptr) run.comm->barrier()->wait(core::Deadline::after(run.comm->timeout()));
}

// The last lines of a run that stopped on a signal: what the checkpoint keeps, and the command
// that goes on from there.
void tell_stop(const Run& run, int signal, int epoch, const EpochStats* partial) {
  run.out << "stopped by " << stop_signal_name(signal) << ": "
          << checkpoint::checkpoint_path(run.run_dir.path).string() << " keeps ";
  if (partial != nullptr) {
    run.out << "epoch " << epoch + 1 << " up to batch " << partial->steps << " of "
            << partial->batches;
  } else {
    run.out << epoch + 1 << " finished epoch(s)";
  }
  run.out << " (step " << run.step << "); continue with: ringlet train --out "
          << run.run_dir.path.string() << " --resume" << std::endl;
}

// A NaN or infinite test loss or model state ends the run with an error before the epoch's
// checkpoint is written, so the last checkpoint on disk is the last good one.
void stop_if_diverged(const Run& run, int epoch, const EvalResult& eval) {
  RINGLET_CHECK(std::isfinite(eval.loss), Error, "epoch ", epoch + 1, ": the test loss is ",
                eval.loss, " (", divergence_hint(run.c), "); the checkpoint of epoch ", epoch,
                " is kept");
  const std::string bad = first_non_finite(*run.model);
  RINGLET_CHECK(bad.empty(), Error, "epoch ", epoch + 1, ": ", bad,
                " holds NaN or infinite values (", divergence_hint(run.c),
                "); the checkpoint of "
                "epoch ",
                epoch, " is kept");
}

TrainResult train_epochs(Run& run) {
  TrainResult result;
  result.out_dir = run.run_dir.path.string();
  result.epochs_done = run.start_epoch;
  if (run.rank == 0 && run.start_epoch < run.c.epochs) {
    run.events = std::make_unique<EventWriter>(run.run_dir.path);
  }
  run.progress = std::make_unique<Progress>(
      run.out, ProgressOptions{.epochs = run.c.epochs,
                               .world = run.world,
                               .log_every = run.c.log_every,
                               .tty = run.tty,
                               .steps_file = run.rank == 0 ? steps_path(run.run_dir.path)
                                                           : std::filesystem::path(),
                               .events = run.events.get()});
  for (int epoch = run.start_epoch; epoch < run.c.epochs; ++epoch) {
    const EpochStats stats = train_epoch(run, epoch);
    if (stats.stopped && !stats.finished()) {
      save_stopped_epoch(run, epoch, stats);
      tell_stop(run, run.vote->signal(), epoch, &stats);
      result.stop_signal = run.vote->signal();
      break;
    }
    result.skipped_steps += stats.skipped;
    const double lr = run.optimizer->lr();
    if (run.schedule) run.schedule->step();
    const EvalResult eval = evaluate(*run.model, *run.test_loader, eval_options(run.c, run.comm));
    stop_if_diverged(run, epoch, eval);
    record_epoch(run, epoch, stats, lr, eval);
    // Nobody moves on (or exits) before rank 0's checkpoint is on disk.
    if (run.comm != nullptr) run.comm->barrier()->wait(core::Deadline::after(run.comm->timeout()));
    result.epochs_done = epoch + 1;
    result.last_eval = eval;
    if (epoch + 1 < run.c.epochs && run.vote->settle()) {
      tell_stop(run, run.vote->signal(), epoch, nullptr);
      result.stop_signal = run.vote->signal();
      break;
    }
  }
  return result;
}

}  // namespace

TrainResult train(TrainConfig config, std::ostream& out, collectives::Communicator* comm,
                  collectives::BufferSpace* space) {
  config.validate();
  config.fill_dataset_defaults();
  Run run(std::move(config), out, comm, space);
  share_cores(run);
  tensor::set_deterministic(run.c.deterministic_on(run.c.device));
  tensor::set_allow_tf32(run.c.allow_tf32);
  // Refused before any write; several ranks need collectives that a graph can hold: device
  // flags, and an all-reduce that runs on the device (not a RINGLET_ALGO=ring request).
  const bool device_flags = run.space != nullptr && run.space->device_flags() != nullptr &&
                            (run.comm == nullptr || runs_on_device(run.comm->all_reduce_algorithm(
                                                        sizeof(float), run.space)));
  const bool graphed = StepGraph::wanted(run.c, run.world, device_flags, run.out);
  run.run_dir = prepare_run_dir(run.c, run.rank, run.out);
  run.out << "config: " << run.c.to_json().dump() << std::endl;
  try {
    make_loaders(run);
    set_up_model(run);
    if (run.run_dir.from_checkpoint) resume(run);
    place_on_device(run);
    if (run.world > 1) distribute(run);
    run.trace =
        std::make_unique<StepTrace>(run.comm, run.rank, run.run_dir.path, run.c.trace_steps);
    run.vote = std::make_unique<StopVote>(run.comm, run.stop_request);
    if (graphed) set_up_graph(run);
  } catch (...) {
    undo_new_run_dir(run.run_dir);  // a start that failed leaves no used-looking directory
    throw;
  }
  const StoreNote store_note(run.run_dir.path, run.rank == 0 && run.comm != nullptr
                                                   ? run.comm->store_address()
                                                   : std::string());
  return train_epochs(run);
}

TrainConfig checkpoint_config(const std::string& path) {
  const checkpoint::safetensors::Metadata metadata = checkpoint::safetensors::read_metadata(path);
  auto it = metadata.find("config");
  RINGLET_CHECK(it != metadata.end(), ValueError, "checkpoint ", path,
                " has no config in its metadata");
  nlohmann::json config;
  try {
    config = nlohmann::json::parse(it->second);
  } catch (const nlohmann::json::exception& e) {
    RINGLET_THROW(ValueError, "checkpoint ", path, ": metadata 'config' is not valid JSON (",
                  e.what(), ")");
  }
  TrainConfig c;
  c.merge_json(config, core::str("checkpoint ", path, ": metadata 'config'"));
  return c;
}

void check_local_ranks_fit(const TrainConfig& c, const std::string& command) {
  const DatasetInfo* data = find_dataset(c.dataset);
  const std::int64_t images = data != nullptr && data->format == DatasetFormat::cifar_binary
                                  ? 60000
                                  : 70000;  // train + test
  const std::int64_t pixels = data != nullptr ? data->channels * data->side * data->side : 784;
  transport::LocalJob job;
  job.ranks = c.nproc;
  job.private_bytes_per_rank = static_cast<std::uint64_t>(images * pixels) + (512ull << 20);
  job.what = core::str(command, " --nproc ", c.nproc);
  transport::check_local_job_fits(job);
}

}  // namespace ringlet::trainer
