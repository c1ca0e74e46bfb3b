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

#include "core/env.h"
#include "core/file_io.h"
#include "core/thread_clocks.h"
#include "core/threads.h"
#include "distributed/ddp.h"
#include "distributed/rank_times.h"
#include "distributed/sync_batch_norm.h"
#include "nn/adam.h"
#include "nn/autocast.h"
#include "nn/clip_grad.h"
#include "nn/grad_scaler.h"
#include "nn/loss.h"
#include "nn/lr_schedule.h"
#include "nn/models.h"
#include "nn/sgd.h"
#include "tensor/device/counters.h"
#include "tensor/device/late_reads.h"
#include "tensor/ops.h"
#include "trainer/checkpoint/checkpoint.h"
#include "trainer/checkpoint/safetensors.h"
#include "trainer/data/dataset_catalog.h"
#include "trainer/finite_state.h"
#include "trainer/input_pipeline.h"
#include "trainer/progress.h"
#include "trainer/run_dir.h"
#include "trainer/step_graph.h"
#include "trainer/step_trace.h"
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

// --- what a run is built from: each a function of the config ---------------------------------

// The model the config names, initialized from its seed (as torch.manual_seed(seed) would),
// shaped for the dataset's images and classes.
std::shared_ptr<nn::Module> build_model(const TrainConfig& c) {
  const DatasetInfo& data = dataset_of(c);
  tensor::Generator gen(c.seed);
  return nn::make_model(c.model, gen, data.classes, data.channels);
}

EvalOptions eval_options(const TrainConfig& c, collectives::Communicator* comm) {
  return EvalOptions{.comm = comm, .mirror = c.tta == "flip", .classes = dataset_of(c).classes};
}

std::unique_ptr<nn::Optimizer> make_optimizer(const TrainConfig& c, nn::Module& model) {
  if (c.optimizer == "sgd") {
    nn::SGDOptions o;
    o.lr = c.lr;
    o.momentum = c.momentum;
    o.weight_decay = c.weight_decay;
    o.nesterov = c.nesterov;
    return std::make_unique<nn::SGD>(model.parameters(), o);
  }
  if (c.optimizer == "adam") {
    nn::AdamOptions o;
    o.lr = c.lr;
    o.weight_decay = c.weight_decay;
    return std::make_unique<nn::Adam>(model.parameters(), o);
  }
  nn::AdamWOptions o;
  o.lr = c.lr;
  o.weight_decay = c.weight_decay;
  return std::make_unique<nn::AdamW>(model.parameters(), o);
}

// Schedules step once per epoch; warmup_epochs ramps the lr linearly from a tenth to the full
// value first (PyTorch's LinearLR, chained with SequentialLR).
std::unique_ptr<nn::LRScheduler> make_schedule(const TrainConfig& c, nn::Optimizer& opt) {
  const int warmup = c.warmup_epochs;
  if (c.schedule == "cosine") return nn::make_warmup_cosine(opt, warmup, c.epochs);
  if (c.schedule == "step") {
    if (warmup == 0) return std::make_unique<nn::StepLR>(opt, c.step_size, c.gamma);
    std::vector<std::unique_ptr<nn::LRScheduler>> parts;
    parts.push_back(std::make_unique<nn::LinearLR>(opt, 0.1, 1.0, warmup));
    parts.push_back(std::make_unique<nn::StepLR>(opt, c.step_size, c.gamma));
    return std::make_unique<nn::SequentialLR>(opt, std::move(parts),
                                              std::vector<std::int64_t>{warmup});
  }
  if (warmup > 0) return std::make_unique<nn::LinearLR>(opt, 0.1, 1.0, warmup);
  return nullptr;
}

core::DType precision_of(const TrainConfig& c) {
  if (c.precision == "bf16") return core::DType::bf16;
  if (c.precision == "f16") return core::DType::f16;
  return core::DType::f32;
}

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
  std::unique_ptr<DataLoader> train_loader, test_loader;
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
  std::unique_ptr<Progress> progress;                         // while the epochs train
  std::unique_ptr<EventWriter> events;                        // rank 0: TensorBoard's event file
  std::unique_ptr<StepTrace> trace;                           // trace_steps (or RINGLET_TRACE)
  int start_epoch = 0;
  std::int64_t step = 0;  // optimizer steps taken, skipped ones included
  core::Device device;    // where the model computes (batches are moved there)
  // Each step's loss, read one step late (a device's step then waits for nothing new).
  tensor::device::LateReads late_losses;
  std::unique_ptr<StepGraph> graph;  // --cuda_graph: the step captured and replayed
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

// The resume's change of epochs when the schedule is cosine, whose horizon they are; null
// when the horizon stays.
const RecipeChange* cosine_horizon_change(const Run& run) {
  if (run.c.schedule != "cosine") return nullptr;
  for (const RecipeChange& change : run.run_dir.changes) {
    if (change.key == "epochs") return &change;
  }
  return nullptr;
}

// A moved cosine horizon is rescaled: the epochs left follow the curve of the new length at
// the epoch the run stands (as a run planned with that length would), said here with the lr.
void tell_schedule_change(const Run& run) {
  const RecipeChange* change = cosine_horizon_change(run);
  if (change == nullptr) return;
  run.out << "schedule: the cosine horizon moves from " << change->before << " to " << change->after
          << " epochs; epochs " << run.start_epoch + 1 << "-" << run.c.epochs << " follow the "
          << change->after << "-epoch curve, from lr " << run.optimizer->lr() << std::endl;
}

// Parameters, optimizer state, position, schedule and loss scale of the last finished epoch.
void resume(Run& run) {
  const fs::path latest = checkpoint_path(resume_source(run.c));
  const double schedule_start_lr = run.optimizer->lr();
  const CheckpointInfo info = load_checkpoint(latest, *run.model, run.optimizer.get());
  // A new cosine horizon: the schedule replays the new curve from its start, not from the old
  // curve's lr (chained from 0 it would stay at 0).
  if (cosine_horizon_change(run) != nullptr) run.optimizer->set_lr(schedule_start_lr);
  const std::string bad = first_non_finite(*run.model);
  RINGLET_CHECK(bad.empty(), ValueError, "checkpoint ", latest.string(), " holds NaN or infinite ",
                "values in ", bad, ": it cannot be resumed (the run had diverged)");
  run.start_epoch = static_cast<int>(info.epoch);
  run.step = info.step;
  for (int e = 0; e < run.start_epoch && run.schedule; ++e) run.schedule->step();
  if (run.scaler.is_enabled() && !info.scaler.empty()) run.scaler.load_state_dict(info.scaler);
  run.out << "resumed from " << latest.string() << " after epoch " << run.start_epoch << std::endl;
  tell_schedule_change(run);
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
StepSample graph_step(Run& run, const Batch& batch, bool measure_norm) {
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
        loss.backward();
        if (run.ddp) run.ddp->finish_gradient_sync();
        run.optimizer->step();
        return loss;
      });
}

StepSample train_step(Run& run, const Batch& batch, bool measure_norm) {
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
    const collectives::TraceScope span(tracer, "backward", "backward");
    run.scaler.scale(loss).backward();
  }
  if (run.ddp) {
    const collectives::TraceScope span(tracer, "gradient sync wait", "ddp");
    run.ddp->finish_gradient_sync();
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
  double mean_loss() const { return loss_sum / std::max<double>(1, static_cast<double>(seen)); }
};

// What to try after a divergence: the learning rate, unless the input normalization alone puts
// pixels (in [0, 1]) far outside the range a network trains in.
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
std::optional<Batch> next_batch(Run& run, EpochIterator& epoch) {
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
// epoch's last once the loop ends.
EpochStats train_epoch(Run& run, int epoch) {
  const auto start = Clock::now();
  auto it = run.train_loader->begin_epoch(epoch);
  run.progress->begin_epoch(epoch, it.num_batches());
  EpochStats stats;
  std::optional<StepSample> pending;
  core::ThreadClocks before = core::ThreadClocks::now();  // a step's start: the last one's end
  for (;;) {
    auto batch = next_batch(run, it);
    if (!batch) break;
    const tensor::device::DeviceCounts counts = tensor::device::device_counts(run.device);
    StepSample sample = train_step(run, *batch, run.progress->wants_grad_norm(stats.steps + 1));
    if (pending) count_step(run, epoch, finish_sample(run, *pending), stats);
    if (!run.device.is_cpu()) sample.device = tensor::device::device_counts(run.device) - counts;
    pending = sample;
    run.trace->end_step();
    ++stats.steps;
    const core::ThreadClocks after = core::ThreadClocks::now();
    stats.splits.push_back(core::split_between(before, after));
    before = after;
  }
  if (pending) count_step(run, epoch, finish_sample(run, *pending), stats);
  run.progress->end_epoch();
  stats.seconds = seconds_since(start);
  return stats;
}

// The sums of an evaluation: loss, examples, correct predictions (with and without test-time
// augmentation) and per class, in one f64 vector so that ranks all-reduce them at once.
class EvalTally {
 public:
  explicit EvalTally(std::int64_t classes)
      : classes_(classes), sums_(static_cast<std::size_t>(kPerClass + 2 * classes), 0.0) {}

  // A batch: the logits that decide, the single view's (equal without augmentation), labels.
  void add(const tensor::Tensor& logits, const tensor::Tensor& single_view,
           const tensor::Tensor& labels_on_host) {
    const tensor::Tensor labels = labels_on_host.to(logits.device());
    sums_[kLoss] += tensor::cross_entropy(logits, labels, tensor::Reduction::sum).item();
    const auto predicted = predictions(logits);
    const auto single = single_view.same(logits) ? predicted : predictions(single_view);
    const auto truth = labels_on_host.to_vector<std::int64_t>();
    for (std::size_t i = 0; i < truth.size(); ++i) {
      RINGLET_CHECK(truth[i] >= 0 && truth[i] < classes_, ValueError, "evaluate: label ", truth[i],
                    " is outside the dataset's ", classes_, " classes");
      const std::size_t at = slot(kPerClass + truth[i]);
      sums_[at] += 1;
      sums_[kExamples] += 1;
      sums_[kSingleCorrect] += single[i] == truth[i] ? 1 : 0;
      if (predicted[i] != truth[i]) continue;
      sums_[kCorrect] += 1;
      sums_[at + static_cast<std::size_t>(classes_)] += 1;
    }
  }

  void all_reduce(collectives::Communicator& comm) {
    comm.all_reduce(sums_.data(), sums_.data(), sums_.size(), core::DType::f64,
                    collectives::ReduceOp::sum)
        ->wait(core::Deadline::after(comm.timeout()));
  }

  EvalResult result() const {
    EvalResult r;
    r.examples = static_cast<std::int64_t>(sums_[kExamples]);
    const double n = std::max<double>(1.0, sums_[kExamples]);
    if (r.examples > 0) {
      r.loss = sums_[kLoss] / n;
      r.accuracy = sums_[kCorrect] / n;
      r.single_view_accuracy = sums_[kSingleCorrect] / n;
    }
    for (std::int64_t k = 0; k < classes_; ++k) {
      r.class_examples.push_back(static_cast<std::int64_t>(sums_[slot(kPerClass + k)]));
      r.class_correct.push_back(static_cast<std::int64_t>(sums_[slot(kPerClass + classes_ + k)]));
    }
    return r;
  }

 private:
  static std::vector<std::int64_t> predictions(const tensor::Tensor& logits) {
    return tensor::argmax(logits, 1).to(core::Device::cpu()).to_vector<std::int64_t>();
  }
  static std::size_t slot(std::int64_t i) { return static_cast<std::size_t>(i); }
  static constexpr std::size_t kLoss = 0, kExamples = 1, kCorrect = 2, kSingleCorrect = 3;
  static constexpr std::int64_t kPerClass = 4;  // then examples per class, then correct per class
  std::int64_t classes_;
  std::vector<double> sums_;
};

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
  save_checkpoint(
      checkpoint_path(run.run_dir.path), *run.model, run.optimizer.get(),
      CheckpointInfo{epoch + 1, run.step, run.c.to_json().dump(),
                     run.scaler.is_enabled() ? run.scaler.state_dict() : nn::NamedState{}});
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
  }
  return result;
}

}  // namespace

EvalResult evaluate(nn::Module& model, DataLoader& loader, const EvalOptions& options) {
  RINGLET_CHECK(options.classes > 0, ValueError,
                "evaluate: EvalOptions::classes must be the dataset's number of classes, got ",
                options.classes);
  tensor::NoGradGuard no_grad;
  const bool was_training = model.is_training();
  model.eval();
  EvalTally tally(options.classes);
  const auto params = model.parameters();
  const core::Device device = params.empty() ? core::Device::cpu() : params.front().device();
  auto it = loader.begin_epoch(0);
  while (auto batch = it.next()) {
    const tensor::Tensor images = batch->images.to(device);
    const tensor::Tensor logits = model.forward(images);
    if (!options.mirror) {
      tally.add(logits, logits, batch->labels);
      continue;
    }
    const tensor::Tensor mirrored = model.forward(tensor::flip(images, -1));
    tally.add(tensor::mul(tensor::add(logits, mirrored), 0.5), logits, batch->labels);
  }
  model.train(was_training);
  if (options.comm != nullptr && options.comm->size() > 1) tally.all_reduce(*options.comm);
  return tally.result();
}

TrainResult train(TrainConfig config, std::ostream& out, collectives::Communicator* comm,
                  collectives::BufferSpace* space) {
  config.validate();
  config.fill_dataset_defaults();
  Run run(std::move(config), out, comm, space);
  share_cores(run);
  tensor::set_deterministic(run.c.deterministic_on(run.c.device));
  tensor::set_allow_tf32(run.c.allow_tf32);
  // Refused before any write; several ranks need collectives that a graph can hold.
  const bool device_flags = run.space != nullptr && run.space->device_sync();
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
    if (graphed) set_up_graph(run);
  } catch (...) {
    undo_new_run_dir(run.run_dir);  // a start that failed leaves no used-looking directory
    throw;
  }
  return train_epochs(run);
}

TrainConfig checkpoint_config(const std::string& path) {
  const safetensors::Metadata metadata = safetensors::read_metadata(path);
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

EvalResult evaluate_checkpoint(const std::string& path, TrainConfig c,
                               collectives::Communicator* comm) {
  c.fill_dataset_defaults();
  const int rank = comm != nullptr ? comm->rank() : 0, world = comm != nullptr ? comm->size() : 1;
  auto model = build_model(c);
  load_checkpoint(path, *model, nullptr);
  // As a resume: weights that hold NaN or an infinity would only print a NaN loss.
  const std::string bad = first_non_finite(*model);
  RINGLET_CHECK(bad.empty(), ValueError, "checkpoint ", path, " holds NaN or infinite values in ",
                bad,
                ": there is nothing to evaluate (the run had diverged, or the file is damaged)");
  const core::Device device = core::parse_device(c.device);
  if (!device.is_cpu()) model->to(device);
  return evaluate(*model, *make_test_loader(c, rank, world), eval_options(c, comm));
}

}  // namespace ringlet::trainer
