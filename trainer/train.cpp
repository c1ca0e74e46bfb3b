// Training loop: see train.h. The data order of epoch e depends only on (seed, e), so a run
// resumed after epoch e sees exactly the batches the uninterrupted run would have seen.
#include "trainer/train.h"

#include <unistd.h>

#include <chrono>
#include <cmath>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <iomanip>
#include <nlohmann/json.hpp>
#include <sstream>

#include "core/env.h"
#include "core/threads.h"
#include "nn/adam.h"
#include "nn/autocast.h"
#include "nn/clip_grad.h"
#include "nn/grad_scaler.h"
#include "nn/loss.h"
#include "nn/lr_schedule.h"
#include "nn/models.h"
#include "nn/sgd.h"
#include "tensor/ops.h"
#include "trainer/checkpoint/checkpoint.h"
#include "trainer/checkpoint/safetensors.h"
#include "trainer/data/distributed_sampler.h"
#include "trainer/data/idx_dataset.h"
#include "trainer/ddp.h"
#include "trainer/sync_batch_norm.h"

namespace ringlet::trainer {
namespace fs = std::filesystem;
namespace {

using Clock = std::chrono::steady_clock;

// The first `limit` examples of another dataset (limit_train / limit_test).
class Prefix : public Dataset {
 public:
  Prefix(std::shared_ptr<const Dataset> inner, std::int64_t limit)
      : inner_(std::move(inner)),
        size_(limit > 0 ? std::min(limit, inner_->size()) : inner_->size()) {}
  std::int64_t size() const override { return size_; }
  Example get(std::int64_t index) const override { return inner_->get(index); }

 private:
  std::shared_ptr<const Dataset> inner_;
  std::int64_t size_;
};

std::shared_ptr<const Dataset> open_split(const TrainConfig& c, Split split) {
  RINGLET_CHECK(c.dataset == "fashion-mnist" || c.dataset == "mnist", ValueError, "dataset '",
                c.dataset, "' is not supported by ringlet train yet (fashion-mnist, mnist)");
  auto data = std::make_shared<IdxDataset>(IdxDataset::open(c.data_dir, split));
  return std::make_shared<Prefix>(data, split == Split::train ? c.limit_train : c.limit_test);
}

std::shared_ptr<const Transform> input_transform(const TrainConfig& c) {
  return std::make_shared<Compose>(std::vector<std::shared_ptr<const Transform>>{
      std::make_shared<ToFloat>(),
      std::make_shared<Normalize>(std::vector<float>{static_cast<float>(c.mean)},
                                  std::vector<float>{static_cast<float>(c.std)})});
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

// Rank r of n evaluates examples r, r + n, ... (no padding: every example counts once).
class ShardSampler : public Sampler {
 public:
  ShardSampler(std::int64_t n, int rank, int world) : n_(n), rank_(rank), world_(world) {}
  std::vector<std::int64_t> indices() const override {
    std::vector<std::int64_t> out;
    for (std::int64_t i = rank_; i < n_; i += world_) out.push_back(i);
    return out;
  }
  std::int64_t size() const override { return n_ > rank_ ? (n_ - rank_ + world_ - 1) / world_ : 0; }

 private:
  std::int64_t n_;
  int rank_, world_;
};

// Discards everything: the output of ranks other than 0.
class NullBuffer : public std::streambuf {
 protected:
  int overflow(int c) override { return c; }
};

std::string format_seconds(double s) {
  const auto total = static_cast<long>(s);
  std::ostringstream out;
  out << total / 60 << ":" << std::setw(2) << std::setfill('0') << total % 60;
  return out.str();
}

}  // namespace

std::string default_run_dir() {
  const std::time_t now = std::time(nullptr);
  std::tm local{};
  localtime_r(&now, &local);
  std::ostringstream name;
  name << "runs/" << std::put_time(&local, "%Y%m%d-%H%M%S");
  return name.str();
}

EvalResult evaluate(nn::Module& model, DataLoader& loader, collectives::Communicator* comm) {
  tensor::NoGradGuard no_grad;
  const bool was_training = model.is_training();
  model.eval();
  EvalResult result;
  double loss_sum = 0;
  std::int64_t correct = 0;
  auto it = loader.begin_epoch(0);
  while (auto batch = it.next()) {
    const tensor::Tensor logits = model.forward(batch->images);
    loss_sum += tensor::cross_entropy(logits, batch->labels, tensor::Reduction::sum).item();
    correct += static_cast<std::int64_t>(
        tensor::sum(tensor::eq(tensor::argmax(logits, 1), batch->labels)).item());
    result.examples += batch->labels.numel();
  }
  model.train(was_training);
  if (comm != nullptr && comm->size() > 1) {
    double sums[3] = {loss_sum, static_cast<double>(correct), static_cast<double>(result.examples)};
    comm->all_reduce(sums, sums, 3, core::DType::f64, collectives::ReduceOp::sum)
        ->wait(core::Deadline::after(comm->timeout()));
    loss_sum = sums[0];
    correct = static_cast<std::int64_t>(sums[1]);
    result.examples = static_cast<std::int64_t>(sums[2]);
  }
  if (result.examples > 0) {
    result.loss = loss_sum / static_cast<double>(result.examples);
    result.accuracy = static_cast<double>(correct) / static_cast<double>(result.examples);
  }
  return result;
}

TrainResult train(TrainConfig c, std::ostream& all_out, collectives::Communicator* comm) {
  c.validate();
  const int rank = comm != nullptr ? comm->rank() : 0;
  const int world = comm != nullptr ? comm->size() : 1;
  NullBuffer null_buffer;
  std::ostream null_out(&null_buffer);
  std::ostream& out = rank == 0 ? all_out : null_out;
  if (c.threads > 0) {
    core::set_num_threads(c.threads);
  } else if (world > 1) {  // share the cores between the local ranks
    const auto local_ranks = core::env_int("LOCAL_WORLD_SIZE", world, 1, 1024);
    core::set_num_threads(std::max<int>(1, core::num_threads() / static_cast<int>(local_ranks)));
  }
  if (c.out.empty()) c.out = default_run_dir();
  const fs::path dir(c.out);
  const fs::path latest = dir / "checkpoint.safetensors";
  RINGLET_CHECK(!c.resume || fs::exists(latest), ValueError, "--resume: ", latest.string(),
                " does not exist (train without --resume to start a new run)");
  if (rank == 0 && c.reset) {  // start over: the old run's checkpoint and metrics go
    fs::remove(latest);
    fs::remove(dir / "metrics.jsonl");
  }
  if (rank == 0) {
    fs::create_directories(dir);
    std::ofstream(dir / "config.json") << c.to_json().dump(2) << "\n";
  }
  out << "config: " << c.to_json().dump() << std::endl;

  auto train_data = open_split(c, Split::train);
  auto test_data = open_split(c, Split::test);
  const auto transform = input_transform(c);
  DataLoaderOptions train_options;
  train_options.batch_size = c.batch_size;
  train_options.num_workers = c.workers;
  train_options.seed = c.seed;
  std::shared_ptr<Sampler> train_sampler;
  if (world > 1) {
    train_sampler =
        std::make_shared<DistributedSampler>(train_data->size(), world, rank, true, c.seed);
  } else {
    train_sampler = std::make_shared<RandomSampler>(train_data->size(), c.seed);
  }
  DataLoader train_loader(train_data, train_options, transform, train_sampler);
  DataLoaderOptions test_options = train_options;
  test_options.batch_size = 1000;
  DataLoader test_loader(test_data, test_options, transform,
                         std::make_shared<ShardSampler>(test_data->size(), rank, world));

  tensor::Generator gen(c.seed);
  std::shared_ptr<nn::Module> model = nn::make_model(c.model, gen, 10, 1);
  model->train();
  auto optimizer = make_optimizer(c, *model);
  auto schedule = make_schedule(c, *optimizer);
  out << model->summary();
  if (world > 1) out << "data parallel over " << world << " ranks" << std::endl;

  // Mixed precision: the layers compute on rounded values (nn/autocast.h); f16 scales the loss
  // and skips the steps whose gradients overflow, as torch.cuda.amp does. Under DDP every rank
  // sees the same averaged gradients, so all of them skip the same steps.
  const core::DType precision = c.precision == "bf16"  ? core::DType::bf16
                                : c.precision == "f16" ? core::DType::f16
                                                       : core::DType::f32;
  nn::GradScaler scaler(nn::GradScalerOptions{.enabled = precision == core::DType::f16});
  if (precision != core::DType::f32) {
    out << "mixed precision: " << c.precision << " inputs to Linear and Conv2d, f32 accumulation"
        << (scaler.is_enabled() ? ", dynamic loss scaling" : "") << std::endl;
  }

  int start_epoch = 0;
  std::int64_t step = 0;
  if (c.resume) {
    const CheckpointInfo info = load_checkpoint(latest, *model, optimizer.get());
    start_epoch = static_cast<int>(info.epoch);
    step = info.step;
    for (int e = 0; e < start_epoch && schedule; ++e) schedule->step();
    if (scaler.is_enabled() && !info.scaler.empty()) scaler.load_state_dict(info.scaler);
    out << "resumed from " << latest.string() << " after epoch " << start_epoch << std::endl;
  }
  // After the resume, so that every rank starts from the loaded (equal) parameters.
  std::unique_ptr<DistributedDataParallel> ddp;
  if (world > 1) {
    if (c.sync_bn) {
      const int layers = convert_sync_batchnorm(*model, *comm);
      out << "SyncBatchNorm: " << layers << " BatchNorm layer(s) use the global batch statistics"
          << std::endl;
    }
    // The loop never keeps a .grad past the optimizer step, so the gradients may live in
    // DDP's buckets (no copy back after each all-reduce).
    ddp = std::make_unique<DistributedDataParallel>(model, *comm,
                                                    DDPOptions{.gradient_as_bucket_view = true});
  }

  const bool tty = ::isatty(STDOUT_FILENO) != 0;
  const nn::CrossEntropyLoss criterion(tensor::Reduction::mean, c.label_smoothing);
  std::ofstream metrics;
  if (rank == 0) metrics.open(dir / "metrics.jsonl", std::ios::app);
  TrainResult result;
  result.out_dir = dir.string();
  result.epochs_done = start_epoch;
  for (int epoch = start_epoch; epoch < c.epochs; ++epoch) {
    const auto start = Clock::now();
    auto it = train_loader.begin_epoch(epoch);
    const std::int64_t batches = it.num_batches();
    double loss_sum = 0;
    std::int64_t seen = 0, in_epoch = 0, skipped = 0;
    while (auto batch = it.next()) {
      optimizer->zero_grad();
      tensor::Tensor logits;
      {
        nn::Autocast amp(precision);
        logits = ddp ? ddp->forward(batch->images) : model->forward(batch->images);
      }
      tensor::Tensor loss = criterion.forward(logits, batch->labels);
      scaler.scale(loss).backward();
      if (ddp) ddp->finish_gradient_sync();
      if (c.clip_grad_norm > 0) {
        scaler.unscale_(*optimizer);  // the clip sees the true gradients
        nn::clip_grad_norm_(model->parameters(), c.clip_grad_norm);
      }
      const bool stepped = scaler.step(*optimizer);
      scaler.update();
      ++step;
      ++in_epoch;
      if (!stepped) {  // inf/NaN gradients: the scale shrank, nothing was learned
        ++skipped;
        ++result.skipped_steps;
        continue;
      }
      const double value = loss.item();
      RINGLET_CHECK(std::isfinite(value), Error, "epoch ", epoch + 1, " step ", step,
                    ": the loss is ", value, " (diverged; try a smaller --lr)");
      loss_sum += value * static_cast<double>(batch->labels.numel());
      seen += batch->labels.numel();
      const double secs = std::chrono::duration<double>(Clock::now() - start).count();
      const double rate = static_cast<double>(seen) * world / std::max(secs, 1e-9);
      if (tty) {
        const double eta =
            secs / static_cast<double>(in_epoch) * static_cast<double>(batches - in_epoch);
        out << "\repoch " << epoch + 1 << "/" << c.epochs << " [" << in_epoch << "/" << batches
            << "] loss " << std::fixed << std::setprecision(4)
            << loss_sum / static_cast<double>(seen) << " " << std::setprecision(0) << rate
            << " img/s eta " << format_seconds(eta) << "   " << std::flush;
      } else if (in_epoch % c.log_every == 0 || in_epoch == batches) {
        out << "epoch " << epoch + 1 << " step " << in_epoch << "/" << batches << " loss "
            << std::fixed << std::setprecision(4) << loss_sum / static_cast<double>(seen) << " "
            << std::setprecision(0) << rate << " img/s" << std::endl;
      }
    }
    if (tty) out << "\n";
    const double train_secs = std::chrono::duration<double>(Clock::now() - start).count();
    const double lr = optimizer->lr();
    if (schedule) schedule->step();
    const EvalResult eval = evaluate(*model, test_loader, comm);
    const double images_per_s = static_cast<double>(seen) * world / std::max(train_secs, 1e-9);
    out << std::fixed << "epoch " << epoch + 1 << "/" << c.epochs << ": train loss "
        << std::setprecision(4) << loss_sum / std::max<double>(1, static_cast<double>(seen))
        << ", test loss " << eval.loss << ", test accuracy " << eval.accuracy << ", "
        << std::setprecision(0) << images_per_s << " img/s, " << std::setprecision(1) << train_secs
        << " s";
    if (scaler.is_enabled()) {
      out << ", " << skipped << " step(s) skipped on overflow, loss scale " << std::setprecision(0)
          << scaler.get_scale();
    }
    out << std::endl;
    nlohmann::json record{{"epoch", epoch + 1},
                          {"step", step},
                          {"loss", loss_sum / std::max<double>(1, static_cast<double>(seen))},
                          {"test_loss", eval.loss},
                          {"accuracy", eval.accuracy},
                          {"lr", lr},
                          {"images_per_s", images_per_s},
                          {"seconds", train_secs}};
    if (scaler.is_enabled()) {
      record["skipped_steps"] = skipped;
      record["loss_scale"] = scaler.get_scale();
    }
    if (rank == 0) {
      metrics << record.dump() << std::endl;
      save_checkpoint(latest, *model, optimizer.get(),
                      CheckpointInfo{epoch + 1, step, c.to_json().dump(),
                                     scaler.is_enabled() ? scaler.state_dict() : nn::NamedState{}});
    }
    // Nobody moves on (or exits) before rank 0's checkpoint is on disk.
    if (comm != nullptr) comm->barrier()->wait(core::Deadline::after(comm->timeout()));
    result.epochs_done = epoch + 1;
    result.last_eval = eval;
  }
  return result;
}

EvalResult evaluate_checkpoint(const std::string& path, const std::string& data_dir,
                               std::ostream& out) {
  const safetensors::File probe = safetensors::read(path);
  auto it = probe.metadata.find("config");
  RINGLET_CHECK(it != probe.metadata.end(), ValueError, "checkpoint ", path,
                " has no config in its metadata");
  TrainConfig c;
  c.merge_json(nlohmann::json::parse(it->second), path);
  if (!data_dir.empty()) c.data_dir = data_dir;
  tensor::Generator gen(c.seed);
  auto model = nn::make_model(c.model, gen, 10, 1);
  load_checkpoint(path, *model, nullptr);
  DataLoaderOptions options;
  options.batch_size = 1000;
  options.num_workers = c.workers;
  DataLoader loader(open_split(c, Split::test), options, input_transform(c));
  const EvalResult r = evaluate(*model, loader);
  out << std::fixed << std::setprecision(4) << "test loss " << r.loss << ", test accuracy "
      << r.accuracy << " (" << r.examples << " examples)\n";
  return r;
}

}  // namespace ringlet::trainer
