// train_bench: time of one training step of a model on synthetic data — forward + backward, and
// forward + backward + SGD step — median of --steps runs after --warmup. The last line is JSON:
// model, batch, threads, fwd_bwd_ms, step_ms, images_per_s (from step_ms), and the breakdown
// forward_ms, backward_ms, sync_ms (DDP's wait for the gradient all-reduces after backward, or the
// barrier's with --sync barrier; 0 with one rank), step_samples_ms, the full steps one by one (rank
// 0's with --nproc; bench/ddp_scaling.py reads them), and time_split: for each rank, where its main
// thread's full step went on average (core/thread_clocks.h): computing, preempted (ready but
// waiting for a core), blocked (asleep: waiting for the other ranks, mostly; on a VM also the
// host's steal), and the CPU time of the rank's other threads meanwhile (the communicator's, and an
// emulated device's workers). Compare with PyTorch in the same run: bench/peers/train_torch.sh 3
// step.
//
// With --nproc N it starts N local ranks itself (ringlet's launcher), each with --threads
// threads and a DDP-wrapped model; images_per_s is then global (N x batch / slowest rank's
// median step) and JSON carries nproc. Compare with bench/peers/train_torch.sh 3 ddp.
//
// --device emu|cuda[:N] runs the model there (each phase ends with a device synchronize, so the
// times are the device's); with --nproc, rank r takes device local_rank % count as `ringlet
// train` does (several ranks per device when there are fewer devices), and DDP all-reduces the
// device buckets through a DeviceSpace (ipc between the ranks). JSON then carries device (rank
// 0's).
//
// --comm-hook fp16_compress|bf16_compress all-reduces DDP's buckets in half precision (as
// `ringlet train --comm-hook`); JSON carries comm_hook.
//
// --sync barrier (with --nproc) leaves DDP out: each rank trains its own copy of the model and
// the ranks only wait for each other once a step, with a barrier where DDP's gradient sync
// ends. That is the step of ranks in lockstep with no gradient traffic at all: what any
// synchronous data parallelism costs on these cores before it moves a byte (bench/
// ddp_scaling.py's "lockstep" run). JSON carries sync (ddp or barrier).
//
// Started by a launcher (RANK/WORLD_SIZE set, as `ringlet launch` on several nodes does) it is
// one rank of that job.
//
// On a device, --block N steps run between host waits, --cuda_graph on replays the full step
// as one captured graph (tensor/device/graph.h) after a warm-up, and --deterministic on takes
// the ops' CPU decomposition instead of the fast path (tensor/determinism.h). JSON then carries
// per_step: the stream operations, host synchronizations and driver allocations of a full step.
// Everywhere per_step carries comm_ops: the collectives rank 0's communicator ran per full step
// (DDP's bucket all-reduces, or --sync barrier's one barrier).
//
// usage: train_bench [--model fmnist_cnn|resnet18|resnet20] [--batch 64] [--threads 1]
//                    [--steps 50] [--warmup 10] [--nproc 1] [--device cpu]
//                    [--comm-hook none|fp16_compress|bf16_compress] [--sync ddp|barrier]
//                    [--block 10] [--cuda_graph on|off] [--deterministic on|off]
//                    [--tf32 on|off] [--precision f32|bf16]
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <iostream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "bench/program_main.h"
#include "core/env.h"
#include "core/thread_clocks.h"
#include "core/threads.h"
#include "device/counters.h"
#include "device/stream.h"
#include "distributed/ddp.h"
#include "distributed/launch/launcher.h"
#include "distributed/process_group.h"
#include "distributed/rank_times.h"
#include "nn/autocast.h"
#include "nn/loss.h"
#include "nn/models.h"
#include "nn/sgd.h"
#include "tensor/cuda/cudnn_conv.h"
#include "tensor/device/graph.h"
#include "tensor/ops.h"
#include "transport/discovery.h"

using namespace ringlet;
using Clock = std::chrono::steady_clock;

namespace {

struct Options {
  std::string model = "fmnist_cnn";
  int batch = 64;
  int threads = 1;
  int steps = 50;
  int warmup = 10;
  int nproc = 1;
  std::string device_text = "cpu";  // as given: each rank places itself (rank_device)
  core::Device device;
  std::string comm_hook = "none";
  std::string sync = "ddp";  // with several ranks: DDP, or only a barrier a step (no gradients)
  int block = 10;            // on a device: steps per timed block (one host sync each)
  bool cuda_graph = false;   // on a device: full steps as replays of one captured step
  bool deterministic = false;
  bool tf32 = false;  // on a GPU: f32 GEMMs and convolutions on tensor cores (TF32)
  core::DType precision = core::DType::f32;  // bf16: the forward under autocast
};

Options parse(int argc, char** argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    static const std::vector<std::string> kFlags{
        "--model",      "--batch",         "--threads",   "--steps",    "--warmup",
        "--nproc",      "--device",        "--comm-hook", "--sync",     "--block",
        "--cuda_graph", "--deterministic", "--tf32",      "--precision"};
    RINGLET_CHECK(std::find(kFlags.begin(), kFlags.end(), arg) != kFlags.end(), ValueError,
                  "unknown flag '", arg, "'");
    RINGLET_CHECK(i + 1 < argc, ValueError, arg, " needs a value");
    const std::string value = argv[++i];
    if (arg == "--model") {
      o.model = value;
    } else if (arg == "--batch") {
      o.batch = static_cast<int>(core::parse_int(value, "--batch"));
    } else if (arg == "--threads") {
      o.threads = static_cast<int>(core::parse_int(value, "--threads"));
    } else if (arg == "--steps") {
      o.steps = static_cast<int>(core::parse_int(value, "--steps"));
    } else if (arg == "--warmup") {
      o.warmup = static_cast<int>(core::parse_int(value, "--warmup"));
    } else if (arg == "--nproc") {
      o.nproc = static_cast<int>(core::parse_int(value, "--nproc"));
    } else if (arg == "--device") {
      o.device = core::parse_device(value);
      o.device_text = value;
    } else if (arg == "--comm-hook") {
      distributed::parse_comm_hook(value);  // a bad name stops here, listing the hooks
      o.comm_hook = value;
    } else if (arg == "--cuda_graph" || arg == "--deterministic" || arg == "--tf32") {
      RINGLET_CHECK(value == "on" || value == "off", ValueError, arg, ": '", value,
                    "' is neither on nor off");
      bool& flag = arg == "--cuda_graph"      ? o.cuda_graph
                   : arg == "--deterministic" ? o.deterministic
                                              : o.tf32;
      flag = value == "on";
    } else if (arg == "--precision") {
      RINGLET_CHECK(value == "f32" || value == "bf16", ValueError, "--precision: '", value,
                    "' is neither f32 nor bf16");
      o.precision = value == "bf16" ? core::DType::bf16 : core::DType::f32;
    } else if (arg == "--block") {
      o.block = static_cast<int>(core::parse_int(value, "--block"));
    } else if (arg == "--sync") {
      RINGLET_CHECK(value == "ddp" || value == "barrier", ValueError, "--sync: '", value,
                    "' is neither ddp nor barrier");
      o.sync = value;
    } else {
      RINGLET_THROW(ValueError, "unknown flag '", arg, "'");
    }
  }
  RINGLET_CHECK(o.batch >= 1 && o.threads >= 1 && o.steps >= 1 && o.warmup >= 0 && o.nproc >= 1 &&
                    o.block >= 1,
                ValueError, "--batch, --threads, --steps, --nproc and --block must be >= 1");
  if (!o.device.is_cpu()) device::check_device(o.device);
  RINGLET_CHECK(!o.cuda_graph || !o.device.is_cpu(), ValueError,
                "--cuda_graph on needs a device (--device cuda or emu): a graph captures a "
                "device's work");
  return o;
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

double ms_since(Clock::time_point start) {
  return std::chrono::duration<double, std::milli>(Clock::now() - start).count();
}

// Medians, in ms, this rank's full steps one by one, and where each rank's full step went
// (means; one entry per rank, rank order).
struct Timings {
  double fwd_bwd_ms = 0, step_ms = 0;
  double forward_ms = 0, backward_ms = 0, sync_ms = 0;  // over every forward+backward run
  std::vector<double> steps_ms;
  std::vector<core::TimeSplit> splits;
  // On a device: what a full step queued and waited for, per step (device/counters.h).
  double stream_ops = 0, host_syncs = 0, driver_allocs = 0;
  // The collectives this rank's communicator ran per full step.
  double comm_ops = 0;
};

// Starts o.nproc local ranks, each running this same command (they see WORLD_SIZE).
int launch_ranks(const Options& o, int argc, char** argv) {
  distributed::LaunchOptions launch;
  launch.nproc_per_node = o.nproc;
  launch.quiet_others = true;
  std::vector<std::string> command{"/proc/self/exe"};
  command.insert(command.end(), argv + 1, argv + argc);
  return distributed::launch(launch, command, std::cout, std::cerr);
}

// The model on one synthetic batch, stepped as the trainer steps it (DDP with the gradients in
// its buckets when there are several ranks, or only a barrier a step with --sync barrier).
struct Bench {
  Bench(const Options& o, collectives::Communicator* comm, collectives::BufferSpace* space)
      : gen(0), precision(o.precision), comm(comm), several(comm != nullptr && comm->size() > 1) {
    const bool mnist = o.model == "fmnist_cnn";
    const std::int64_t channels = mnist ? 1 : 3, side = mnist ? 28 : 32;
    model = nn::make_model(o.model, gen, 10, channels);
    model->train();
    model->to(o.device);
    x = tensor::randn({o.batch, channels, side, side}, gen).to(o.device);
    y = tensor::randint(0, 10, {o.batch}, gen).to(o.device);
    sgd = std::make_unique<nn::SGD>(
        model->parameters(), nn::SGDOptions{.lr = 0.05, .momentum = 0.9, .weight_decay = 5e-4});
    if (several && o.sync == "ddp") {
      ddp = std::make_unique<distributed::DistributedDataParallel>(
          model, *comm,
          distributed::DDPOptions{.device_space = space,
                                  .gradient_as_bucket_view = true,
                                  .comm_hook = distributed::parse_comm_hook(o.comm_hook)});
    }
  }
  tensor::Tensor forward() {
    tensor::Tensor logits;
    {
      nn::Autocast amp(precision);
      logits = ddp ? ddp->forward(x) : model->forward(x);
    }
    return criterion.forward(logits, y);
  }
  // After backward: the barrier of --sync barrier (DDP's wait ends backward itself).
  void sync() {
    if (!ddp && several) comm->barrier()->wait(core::Deadline::after(comm->timeout()));
  }
  // What the communicator has run so far (nothing without one).
  collectives::CommCounters comm_counters() const {
    return comm != nullptr ? comm->counters() : collectives::CommCounters{};
  }
  // The part of the last backward that waited for DDP's all-reduces, in ms.
  double sync_wait_ms() const {
    if (!ddp) return 0;
    return std::chrono::duration<double, std::milli>(ddp->last_sync_wait()).count();
  }
  // forward + backward (+ the update): the loss, not read.
  tensor::Tensor step(bool update) {
    sgd->zero_grad();
    tensor::Tensor loss = forward();
    loss.backward();
    sync();
    if (update) sgd->step();
    return loss;
  }

  tensor::Generator gen;
  core::DType precision;
  collectives::Communicator* comm;
  bool several;
  std::shared_ptr<nn::Module> model;
  tensor::Tensor x, y;
  nn::CrossEntropyLoss criterion;
  std::unique_ptr<nn::SGD> sgd;
  std::unique_ptr<distributed::DistributedDataParallel> ddp;
  std::unique_ptr<tensor::Graph> graph;  // --cuda_graph on: the full step, captured
  tensor::Tensor graph_loss;             // its static output
};

void check_loss(double loss) {
  RINGLET_CHECK(std::isfinite(loss), Error, "train_bench: the loss is not finite");
}

// On the host: o.warmup forward+backward runs, then o.steps timed forward+backward runs (with
// the time of each phase), then o.steps timed full steps.
Timings measure_host(const Options& o, Bench& b) {
  std::vector<double> phase[3];  // forward, backward, gradient sync wait
  auto fwd_bwd = [&] {
    b.sgd->zero_grad();
    const auto t0 = Clock::now();
    tensor::Tensor loss = b.forward();
    const auto t1 = Clock::now();
    loss.backward();
    const auto t2 = Clock::now();
    b.sync();
    const auto t3 = Clock::now();
    // DDP's wait happened at the end of backward: counted as the sync wait, not as backward.
    const double wait = b.sync_wait_ms();
    phase[0].push_back(std::chrono::duration<double, std::milli>(t1 - t0).count());
    phase[1].push_back(std::chrono::duration<double, std::milli>(t2 - t1).count() - wait);
    phase[2].push_back(std::chrono::duration<double, std::milli>(t3 - t2).count() + wait);
    check_loss(loss.item());
  };
  std::vector<double> fb, full;
  std::vector<core::TimeSplit> splits;
  for (int i = 0; i < o.warmup; ++i) fwd_bwd();
  for (int i = 0; i < o.steps; ++i) {
    const auto start = Clock::now();
    fwd_bwd();
    fb.push_back(ms_since(start));
  }
  const collectives::CommCounters comm_start = b.comm_counters();
  // One reading between steps: the end of one step is the start of the next.
  core::ThreadClocks before = core::ThreadClocks::now();
  for (int i = 0; i < o.steps; ++i) {
    fwd_bwd();
    b.sgd->step();
    const core::ThreadClocks after = core::ThreadClocks::now();
    splits.push_back(core::split_between(before, after));
    full.push_back(splits.back().wall_ms);
    before = after;
  }
  Timings t{median(fb),       median(full), median(phase[0]),          median(phase[1]),
            median(phase[2]), full,         {core::mean_split(splits)}};
  t.comm_ops = static_cast<double>((b.comm_counters() - comm_start).ops) / o.steps;
  return t;
}

// On a device: steps queue back to back, and the host waits once per block of o.block steps
// (as PyTorch is timed with events around many steps): a step's time is its block's over its
// steps, medians over the blocks. The block's last loss comes back through pinned memory in
// that same wait. No phase split (that would take a wait per phase): forward_ms and the others
// are 0. Counts: what the full steps queued and waited for, per step.
Timings measure_device(const Options& o, Bench& b) {
  const int blocks = std::max(1, (o.steps + o.block - 1) / o.block);
  auto run_block = [&](bool update, std::vector<core::TimeSplit>* splits) {
    const core::ThreadClocks before = core::ThreadClocks::now();
    tensor::Tensor loss;
    for (int i = 0; i < o.block; ++i) {
      if (update && b.graph != nullptr) {
        b.graph->replay();
        loss = b.graph_loss;
      } else {
        loss = b.step(update);
      }
    }
    // The step's stream: DDP's collectives are ordered into it, so its end is the block's (a
    // whole-device synchronize would wait on every stream, one host wait each).
    const tensor::Tensor read = loss.to(core::Device::cpu(), /*non_blocking=*/true);
    device::current_stream(o.device).synchronize();
    check_loss(read.item());
    const core::TimeSplit split = core::split_between(before, core::ThreadClocks::now());
    if (splits != nullptr) splits->push_back(split);
    return split.wall_ms / o.block;
  };
  for (int i = 0; i < o.warmup; ++i) b.step(true);
  device::synchronize(o.device);
  std::vector<double> fb, full;
  for (int k = 0; k < blocks; ++k) fb.push_back(run_block(false, nullptr));
  if (o.cuda_graph) {
    // The full step captured once, after full steps warmed the cache with its blocks, and
    // replayed from then on; its static output is the loss.
    for (int i = 0; i < 3; ++i) b.step(true);
    tensor::Tensor loss;
    b.graph =
        tensor::Graph::capture(device::current_stream(o.device), [&] { loss = b.step(true); });
    b.graph_loss = loss;
  }
  std::vector<core::TimeSplit> splits;
  const device::DeviceCounts start = device::device_counts(o.device);
  const collectives::CommCounters comm_start = b.comm_counters();
  for (int k = 0; k < blocks; ++k) full.push_back(run_block(true, &splits));
  const device::DeviceCounts used = device::device_counts(o.device) - start;
  const std::uint64_t comm_ops = (b.comm_counters() - comm_start).ops;
  core::TimeSplit per_step = core::mean_split(splits);
  for (double* v : {&per_step.wall_ms, &per_step.computing_ms, &per_step.preempted_ms,
                    &per_step.blocked_ms, &per_step.other_threads_ms}) {
    *v /= o.block;
  }
  Timings t{median(fb), median(full), 0, 0, 0, full, {per_step}};
  const double steps = static_cast<double>(blocks) * o.block;
  t.stream_ops = static_cast<double>(used.stream_ops) / steps;
  t.host_syncs = static_cast<double>(used.host_syncs) / steps;
  t.driver_allocs = static_cast<double>(used.driver_allocs) / steps;
  t.comm_ops = static_cast<double>(comm_ops) / steps;
  return t;
}

Timings measure(const Options& o, collectives::Communicator* comm,
                collectives::BufferSpace* space) {
  tensor::set_deterministic(o.deterministic);
  tensor::set_allow_tf32(o.tf32);
  Bench b(o, comm, space);
  return o.device.is_cpu() ? measure_host(o, b) : measure_device(o, b);
}

// Every rank's medians become the slowest rank's (it sets the pace), and every rank learns
// where each rank's step went.
Timings slowest(const Timings& t, collectives::Communicator& comm) {
  const auto deadline = core::Deadline::after(std::chrono::minutes(1));
  double values[5] = {t.fwd_bwd_ms, t.step_ms, t.forward_ms, t.backward_ms, t.sync_ms};
  comm.all_reduce(values, values, 5, core::DType::f64, collectives::ReduceOp::max)->wait(deadline);
  Timings out{values[0], values[1], values[2], values[3], values[4], t.steps_ms, {}};
  out.stream_ops = t.stream_ops;  // rank 0's
  out.host_syncs = t.host_syncs;
  out.driver_allocs = t.driver_allocs;
  out.comm_ops = t.comm_ops;
  out.splits = distributed::gather_splits(&comm, t.splits.front(), deadline);
  return out;
}

// A line per rank saying where its full step went; the same as JSON for the last line.
nlohmann::json report_splits(const std::vector<core::TimeSplit>& splits) {
  for (std::size_t r = 0; r < splits.size(); ++r) {
    const core::TimeSplit& s = splits[r];
    char preempted[32] = "unknown";
    if (!std::isnan(s.preempted_ms)) {
      std::snprintf(preempted, sizeof preempted, "%.2f", s.preempted_ms);
    }
    std::printf(
        "  rank %zu, a full step (mean %.2f ms): computing %.2f, preempted %s, blocked "
        "%.2f ms; other threads' CPU %.2f ms\n",
        r, s.wall_ms, s.computing_ms, preempted, s.blocked_ms, s.other_threads_ms);
  }
  return distributed::splits_json(splits);
}

void report(const Options& o, int world, const Timings& t) {
  const double images_per_s = world * o.batch / t.step_ms * 1e3;
  const bool barrier = world > 1 && o.sync == "barrier";
  std::printf("# ranks: %d\n", world);
  std::printf("# train_bench: %s, batch %d, %d thread(s), on %s, median of %d steps%s%s%s\n",
              o.model.c_str(), o.batch, o.threads, o.device.str().c_str(), o.steps,
              o.comm_hook == "none" ? "" : ", comm hook ",
              o.comm_hook == "none" ? "" : o.comm_hook.c_str(),
              barrier ? ", no DDP: a barrier a step" : "");
  if (o.device.is_cuda()) {  // which convolutions the step ran (tensor/ops/conv_device.cpp)
    const std::string& why = tensor::cuda::cudnn_unavailable();
    std::printf("# convolutions: %s\n",
                why.empty() ? "cuDNN for f32, ringlet's kernels for f16 / bf16"
                            : ("ringlet's kernels (no cuDNN: " + why + ")").c_str());
  }
  std::printf("  forward+backward        %9.2f ms\n", t.fwd_bwd_ms);
  std::printf("  forward+backward+step   %9.2f ms   (%.0f images/s)\n", t.step_ms, images_per_s);
  if (o.device.is_cpu()) {
    std::printf("  of which forward %.2f, backward %.2f, %s wait %.2f ms\n", t.forward_ms,
                t.backward_ms, barrier ? "barrier" : "gradient sync", t.sync_ms);
  }
  if (!o.device.is_cpu()) {
    std::printf(
        "  per step (rank 0): %.1f stream operations, %.2f host synchronizations, %.2f "
        "driver allocations; one host wait per %d steps%s\n",
        t.stream_ops, t.host_syncs, t.driver_allocs, o.block,
        o.cuda_graph ? "; full steps replay a captured graph" : "");
  }
  const nlohmann::json splits = report_splits(t.splits);
  nlohmann::json line{{"bench", "train_bench"},
                      {"model", o.model},
                      {"batch", o.batch},
                      {"threads", o.threads},
                      {"fwd_bwd_ms", t.fwd_bwd_ms},
                      {"step_ms", t.step_ms},
                      {"images_per_s", images_per_s},
                      {"forward_ms", t.forward_ms},
                      {"backward_ms", t.backward_ms},
                      {"sync_ms", t.sync_ms},
                      {"step_samples_ms", t.steps_ms},
                      {"time_split", splits},
                      {"nproc", world},
                      {"comm_hook", o.comm_hook},
                      {"sync", o.sync},
                      {"device", o.device.str()},
                      {"cuda_graph", o.cuda_graph},
                      {"deterministic", o.deterministic},
                      {"tf32", o.tf32},
                      {"precision", core::dtype_name(o.precision)},
                      {"per_step",
                       {{"stream_ops", t.stream_ops},
                        {"host_syncs", t.host_syncs},
                        {"driver_allocs", t.driver_allocs},
                        {"comm_ops", t.comm_ops}}}};
  std::cout << line.dump() << std::endl;
}

// One rank's run (or, with --nproc and not yet a rank, the launch of all of them).
int run(Options o, int argc, char** argv) {
  {
    const bool worker = transport::launched_as_rank();
    if (o.nproc > 1 && !worker) return launch_ranks(o, argc, argv);
    core::set_num_threads(o.threads);
    distributed::DistributedContext job;
    if (worker) {
      const auto deadline = core::Deadline::after(std::chrono::minutes(5));
      job = distributed::join_from_environment("bench", deadline);
      if (!o.device.is_cpu()) {
        o.device = distributed::rank_device(o.device_text, job.info);
        distributed::attach_device(job, "bench", o.device, deadline);
      }
    }
    collectives::Communicator* comm = job.comm.get();
    Timings timings = measure(o, comm, job.space.get());
    if (comm != nullptr) timings = slowest(timings, *comm);
    if (comm != nullptr && comm->rank() != 0) return 0;
    report(o, comm != nullptr ? comm->size() : 1, timings);
    return 0;
  }
}

}  // namespace

int main(int argc, char** argv) {
  return ringlet::bench::program_main(
      "train_bench",
      "usage: train_bench [--model fmnist_cnn|resnet18|resnet20] [--batch 64] [--threads 1]\n"
      "                   [--steps 50] [--warmup 10] [--nproc 1] [--device cpu|emu|cuda[:N]]\n"
      "                   [--comm-hook none|fp16_compress|bf16_compress] [--sync ddp|barrier]\n"
      "                   [--block 10] [--cuda_graph on|off] [--deterministic on|off]\n"
      "                   [--tf32 on|off] [--precision f32|bf16]\n"
      "  On a device: --block steps per host wait; --cuda_graph on replays the full step as one\n"
      "  captured graph; --deterministic on takes each op's CPU decomposition (bit for bit on the\n"
      "  emulated device), off (default) the fast path (one batched GEMM per convolution pass);\n"
      "  --tf32 on lets a GPU's f32 GEMMs and convolutions use tensor cores (TF32); --precision\n"
      "  bf16 runs the forward under bf16 autocast (tensor cores on a GPU).\n",
      argc, argv, parse, [&](const Options& o) { return run(o, argc, argv); });
}
