// train_bench: time of one training step of a model on synthetic data — forward + backward,
// and forward + backward + SGD step — median of --steps runs after --warmup. The last line is
// JSON: model, batch, threads, fwd_bwd_ms, step_ms, images_per_s (from step_ms), and the
// breakdown forward_ms, backward_ms, sync_ms (DDP's wait for the gradient all-reduces after
// backward; 0 with one rank). Compare with PyTorch in the same run:
// bench/peers/train_torch.sh 3 step.
//
// With --nproc N it starts N local ranks itself (ringlet's launcher), each with --threads
// threads and a DDP-wrapped model; images_per_s is then global (N x batch / slowest rank's
// median step) and JSON carries nproc. Compare with bench/peers/train_torch.sh 3 ddp.
//
// usage: train_bench [--model fmnist_cnn|resnet18|resnet20] [--batch 64] [--threads 1]
//                    [--steps 50] [--warmup 10] [--nproc 1]
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <iostream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "core/env.h"
#include "core/threads.h"
#include "nn/loss.h"
#include "nn/models.h"
#include "nn/sgd.h"
#include "tensor/ops.h"
#include "trainer/ddp.h"
#include "trainer/distributed.h"
#include "trainer/launch/launcher.h"
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
};

Options parse(int argc, char** argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    RINGLET_CHECK(i + 1 < argc, ValueError, "train_bench: ", arg, " needs a value");
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
    } else {
      RINGLET_THROW(ValueError, "train_bench: unknown flag '", arg,
                    "' (flags: --model, --batch, --threads, --steps, --warmup, --nproc)");
    }
  }
  RINGLET_CHECK(o.batch >= 1 && o.threads >= 1 && o.steps >= 1 && o.warmup >= 0 && o.nproc >= 1,
                ValueError, "train_bench: --batch, --threads, --steps and --nproc must be >= 1");
  return o;
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

}  // namespace

int main(int argc, char** argv) {
  try {
    const Options o = parse(argc, argv);
    const bool worker = transport::launched_as_rank();
    if (o.nproc > 1 && !worker) {  // start the ranks, each running this same command
      trainer::LaunchOptions launch;
      launch.nproc_per_node = o.nproc;
      launch.quiet_others = true;
      std::vector<std::string> command{"/proc/self/exe"};
      command.insert(command.end(), argv + 1, argv + argc);
      return trainer::launch(launch, command, std::cout, std::cerr);
    }
    core::set_num_threads(o.threads);
    trainer::DistributedContext job;
    if (worker)
      job = trainer::join_from_environment("bench", core::Deadline::after(std::chrono::minutes(5)));
    collectives::Communicator* comm = job.comm.get();
    const int world = comm != nullptr ? comm->size() : 1;
    const int rank = comm != nullptr ? comm->rank() : 0;
    tensor::Generator gen(0);
    const bool mnist = o.model == "fmnist_cnn";
    const std::int64_t channels = mnist ? 1 : 3, side = mnist ? 28 : 32;
    auto model = nn::make_model(o.model, gen, 10, channels);
    model->train();
    const tensor::Tensor x = tensor::randn({o.batch, channels, side, side}, gen);
    const tensor::Tensor y = tensor::randint(0, 10, {o.batch}, gen);
    nn::CrossEntropyLoss criterion;
    nn::SGD sgd(model->parameters(), {.lr = 0.05, .momentum = 0.9, .weight_decay = 5e-4});
    std::unique_ptr<trainer::DistributedDataParallel> ddp;
    if (world > 1) {  // as the trainer runs it
      ddp = std::make_unique<trainer::DistributedDataParallel>(
          model, *comm, trainer::DDPOptions{.gradient_as_bucket_view = true});
    }

    std::vector<double> phase[3];  // forward, backward, gradient sync wait
    auto fwd_bwd = [&] {
      sgd.zero_grad();
      const auto t0 = Clock::now();
      tensor::Tensor loss = criterion.forward(ddp ? ddp->forward(x) : model->forward(x), y);
      const auto t1 = Clock::now();
      loss.backward();
      const auto t2 = Clock::now();
      if (ddp) ddp->finish_gradient_sync();
      const auto t3 = Clock::now();
      phase[0].push_back(std::chrono::duration<double, std::milli>(t1 - t0).count());
      phase[1].push_back(std::chrono::duration<double, std::milli>(t2 - t1).count());
      phase[2].push_back(std::chrono::duration<double, std::milli>(t3 - t2).count());
      const double value = loss.item();
      RINGLET_CHECK(std::isfinite(value), Error, "train_bench: the loss is not finite");
    };
    std::vector<double> fb, full;
    for (int i = 0; i < o.warmup; ++i) fwd_bwd();
    for (int i = 0; i < o.steps; ++i) {
      const auto start = Clock::now();
      fwd_bwd();
      fb.push_back(std::chrono::duration<double, std::milli>(Clock::now() - start).count());
    }
    for (int i = 0; i < o.steps; ++i) {
      const auto start = Clock::now();
      fwd_bwd();
      sgd.step();
      full.push_back(std::chrono::duration<double, std::milli>(Clock::now() - start).count());
    }
    double medians[5] = {median(fb), median(full), median(phase[0]), median(phase[1]),
                         median(phase[2])};
    if (comm != nullptr) {  // the slowest rank sets the pace
      comm->all_reduce(medians, medians, 5, core::DType::f64, collectives::ReduceOp::max)
          ->wait(core::Deadline::after(std::chrono::minutes(1)));
    }
    const double fwd_bwd_ms = medians[0], step_ms = medians[1];
    if (rank != 0) return 0;
    const double images_per_s = world * o.batch / step_ms * 1e3;
    std::printf("# ranks: %d\n", world);
    std::printf("# train_bench: %s, batch %d, %d thread(s), median of %d steps\n", o.model.c_str(),
                o.batch, o.threads, o.steps);
    std::printf("  forward+backward        %9.2f ms\n", fwd_bwd_ms);
    std::printf("  forward+backward+step   %9.2f ms   (%.0f images/s)\n", step_ms, images_per_s);
    std::printf("  of which forward %.2f, backward %.2f, gradient sync wait %.2f ms\n", medians[2],
                medians[3], medians[4]);
    nlohmann::json line{{"bench", "train_bench"},
                        {"model", o.model},
                        {"batch", o.batch},
                        {"threads", o.threads},
                        {"fwd_bwd_ms", fwd_bwd_ms},
                        {"step_ms", step_ms},
                        {"images_per_s", images_per_s},
                        {"forward_ms", medians[2]},
                        {"backward_ms", medians[3]},
                        {"sync_ms", medians[4]},
                        {"nproc", world}};
    std::cout << line.dump() << std::endl;
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "train_bench: %s\n", e.what());
    return 1;
  }
}
