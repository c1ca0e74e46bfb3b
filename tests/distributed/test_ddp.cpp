// DDP: 2 ranks x batch 32 end with the parameters of 1 rank x batch 64 on the same data; the
// first bucket's all-reduce starts before backward ends (trace); the fp16 / bf16 compression
// hooks halve the bytes all-reduced (trace) and round the average; parameters start from rank
// 0's values (how backward finishes a step: test_ddp_backward.cpp). DistributedSampler shards
// are disjoint, cover, equal and reshuffle.
// SyncBatchNorm: 2 ranks x 32 with synchronized statistics match 1 rank x 64, buffers included
// (and plain BatchNorm, as a control, does not). On the emulated device, DDP's buckets
// all-reduced on the communication stream give the same parameters as the host's reference,
// with and without SyncBatchNorm; with device flags a step's only host wait is the loss read.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <functional>
#include <nlohmann/json.hpp>
#include <set>

#include "collectives/device_space.h"
#include "collectives/trace.h"
#include "comm_ranks.h"
#include "cuda_probe.h"
#include "data/distributed_sampler.h"
#include "device/counters.h"
#include "distributed/ddp.h"
#include "distributed/sync_batch_norm.h"
#include "nn/activation.h"
#include "nn/batch_norm.h"
#include "nn/conv2d.h"
#include "nn/flatten.h"
#include "nn/linear.h"
#include "nn/loss.h"
#include "nn/models.h"
#include "nn/sequential.h"
#include "nn/sgd.h"
#include "temp_dir.h"
#include "tensor/ops.h"

using namespace ringlet;
using namespace ringlet::testing;
using tensor::Tensor;

namespace {

std::shared_ptr<nn::Sequential> mlp(std::uint64_t seed) {
  tensor::Generator gen(seed);
  auto m = std::make_shared<nn::Sequential>();
  m->add(std::make_shared<nn::Linear>(20, 64, gen));
  m->add(std::make_shared<nn::ReLU>());
  m->add(std::make_shared<nn::Linear>(64, 10, gen));
  return m;
}

struct Data {
  Tensor x, y;
};

// conv -> BatchNorm -> ReLU -> linear, on [N, 2, 6, 6] images.
std::shared_ptr<nn::Sequential> conv_bn(std::uint64_t seed) {
  tensor::Generator gen(seed);
  auto m = std::make_shared<nn::Sequential>();
  m->add(std::make_shared<nn::Conv2d>(2, 4, 3, gen, nn::Conv2dOptions{.padding = 1}));
  m->add(std::make_shared<nn::BatchNorm2d>(4));
  m->add(std::make_shared<nn::ReLU>());
  m->add(std::make_shared<nn::Flatten>());
  m->add(std::make_shared<nn::Linear>(4 * 36, 10, gen));
  return m;
}

Data image_batch(int step) {
  tensor::Generator gen(2000 + step);
  // a per-sample offset makes the two halves' statistics differ from the whole batch's
  Tensor x = tensor::add(tensor::randn({64, 2, 6, 6}, gen),
                         tensor::reshape(tensor::arange(64, tensor::DType::f32), {64, 1, 1, 1}));
  return {x, tensor::randint(0, 10, {64}, gen)};
}

Data batch(int step) {
  tensor::Generator gen(1000 + step);
  return {tensor::randn({64, 20}, gen), tensor::randint(0, 10, {64}, gen)};
}

// The single-process reference: `steps` SGD steps of cross-entropy on batch(0), batch(1), ...
void train_reference(nn::Module& model, nn::SGD& opt, Data (*batch)(int), int steps) {
  nn::CrossEntropyLoss loss_fn;
  for (int s = 0; s < steps; ++s) {
    const Data d = batch(s);
    opt.zero_grad();
    loss_fn.forward(model.forward(d.x), d.y).backward();
    opt.step();
  }
}

std::vector<std::vector<float>> params_of(nn::Module& m) {  // read back from any device
  std::vector<std::vector<float>> out;
  for (auto& p : m.parameters()) out.push_back(p.to(core::Device::cpu()).to_vector<float>());
  return out;
}

// The MLP's parameters after `steps` SGD steps of one rank on the whole of each batch.
std::vector<std::vector<float>> reference_params(int steps) {
  auto single = mlp(1);
  nn::SGD opt(single->parameters(), {.lr = 0.1, .momentum = 0.9, .weight_decay = 1e-4});
  train_reference(*single, opt, batch, steps);
  return params_of(*single);
}

std::vector<std::vector<float>> state_of(nn::Module& m) {
  std::vector<std::vector<float>> out = params_of(m);
  for (auto& [name, b] : m.named_buffers()) {
    if (b.dtype() == tensor::DType::f32)
      out.push_back(b.to(core::Device::cpu()).to_vector<float>());
  }
  return out;
}

// `steps` DDP steps of rank `rank`'s half (32) of batch(0), batch(1), ..., on `device`.
void ddp_steps(distributed::DistributedDataParallel& ddp, nn::SGD& opt, Data (*batch)(int),
               int rank, int steps, core::Device device) {
  nn::CrossEntropyLoss local_loss;
  for (int s = 0; s < steps; ++s) {
    const Data d = batch(s);
    const Tensor x = tensor::narrow(d.x, 0, rank * 32, 32).to(device);
    const Tensor y = tensor::narrow(d.y, 0, rank * 32, 32).contiguous().to(device);
    opt.zero_grad();
    local_loss.forward(ddp.forward(x), y).backward();  // PyTorch's loop: backward finishes DDP
    opt.step();
  }
}

// Both ranks end with the reference's parameters, and with the same bits as each other.
// Tolerance: the mean over 64 is computed as the average of two means over 32 — equal in exact
// arithmetic, a few ulps apart in f32 — and 10 momentum steps carry that forward.
void match_reference(const std::vector<std::vector<std::vector<float>>>& got,
                     const std::vector<std::vector<float>>& expected) {
  for (int r = 0; r < 2; ++r) {
    REQUIRE(got[r].size() == expected.size());
    for (std::size_t i = 0; i < expected.size(); ++i) {
      for (std::size_t j = 0; j < expected[i].size(); ++j) {
        REQUIRE(got[r][i][j] == doctest::Approx(expected[i][j]).epsilon(1e-4).scale(1e-3));
      }
    }
  }
  CHECK(got[0] == got[1]);  // ranks agree bitwise
}

}  // namespace

TEST_CASE("2 ranks x batch 32 match 1 rank x batch 64 after 10 SGD steps") {
  constexpr int kSteps = 10;
  const auto expected = reference_params(kSteps);

  // Copied back into each .grad, or (gradient_as_bucket_view) left in the bucket, the .grads
  // being views of it.
  for (const bool view : {false, true}) {
    CAPTURE(view);
    std::vector<std::vector<std::vector<float>>> got(2);
    std::vector<int> grads_in_bucket(2, 0);
    CommOptions options;
    options.name = view ? "ddp-eq-view" : "ddp-eq";
    run_comm(2, "shm", options, [&](int rank, Communicator& comm) {
      auto model = mlp(rank == 0 ? 1 : 99);  // rank 1 starts elsewhere: DDP must broadcast
      distributed::DistributedDataParallel ddp(model, comm, {.gradient_as_bucket_view = view});
      nn::SGD opt(model->parameters(), {.lr = 0.1, .momentum = 0.9, .weight_decay = 1e-4});
      ddp_steps(ddp, opt, batch, rank, kSteps, core::Device::cpu());
      // The MLP's 4 parameters fit one bucket: as views, their .grads share its storage.
      const auto params = model->parameters();
      for (const auto& p : params) {
        grads_in_bucket[rank] += p.grad().storage() == params[0].grad().storage() ? 1 : 0;
      }
      got[rank] = params_of(*model);
    });
    CHECK(grads_in_bucket[0] == (view ? 4 : 1));
    CHECK(grads_in_bucket[1] == (view ? 4 : 1));
    match_reference(got, expected);
  }
}

namespace {

using DeviceRankBody = std::function<void(int rank, core::Device dev, Communicator& comm,
                                          collectives::DeviceSpace& space)>;

// Two ranks as threads, rank r on device_of(r), each with a communicator over `transport` and a
// device space named `name` (device flags where they can run, unless `flags` is off); the first
// rank's error is rethrown after both joined.
void run_device_ranks(const std::string& name, const std::function<core::Device(int)>& device_of,
                      const DeviceRankBody& body,
                      collectives::DeviceFlags flags = collectives::DeviceFlags::automatic,
                      const std::string& transport = "shm") {
  MemoryStore store;
  std::vector<std::exception_ptr> errors(2);
  std::vector<std::thread> threads;
  for (int rank = 0; rank < 2; ++rank) {
    threads.emplace_back([&, rank] {
      try {
        const core::Device dev = device_of(rank);
        const auto deadline = core::Deadline::after(60s);
        // Ranks are threads here: the spaces use each other's windows as plain pointers
        // (and device flags where they can); the space outlives the communicator.
        auto space =
            collectives::DeviceSpace::create(store, name, rank, 2, dev, {.flags = flags}, deadline);
        CommOptions options;
        options.name = name;
        auto comm = Communicator::create(store, mesh_options(rank, 2, transport, options.name),
                                         options, deadline);
        body(rank, dev, *comm, *space);
      } catch (...) {
        errors[rank] = std::current_exception();
      }
    });
  }
  for (auto& t : threads) t.join();
  for (auto& e : errors) {
    if (e) std::rethrow_exception(e);
  }
}

// DDP on devices (rank r on device_of(r)): 2 ranks x batch 32 match 1 rank x batch 64.
void device_equivalence(const std::function<core::Device(int)>& device_of,
                        collectives::DeviceFlags flags = collectives::DeviceFlags::automatic,
                        const std::string& transport = "shm") {
  constexpr int kSteps = 10;
  const auto expected = reference_params(kSteps);
  for (const bool view : {false, true}) {
    CAPTURE(view);
    std::vector<std::vector<std::vector<float>>> got(2);
    std::vector<char> device_sync(2);  // not vector<bool>: each rank's thread writes its own
    run_device_ranks(
        view ? "ddp-dev-view" : "ddp-dev", device_of,
        [&](int rank, core::Device dev, Communicator& comm, collectives::DeviceSpace& space) {
          device_sync[rank] = space.device_sync();
          auto model = mlp(rank == 0 ? 1 : 99);
          model->to(dev);
          distributed::DistributedDataParallel ddp(
              model, comm, {.device_space = &space, .gradient_as_bucket_view = view});
          nn::SGD opt(model->parameters(), {.lr = 0.1, .momentum = 0.9, .weight_decay = 1e-4});
          ddp_steps(ddp, opt, batch, rank, kSteps, dev);
          got[rank] = params_of(*model);
        },
        flags, transport);
    if (flags == collectives::DeviceFlags::off) CHECK(device_sync == std::vector<char>{0, 0});
    match_reference(got, expected);
  }
}

// The conv/BatchNorm model's parameters and buffers after `steps` SGD steps of one rank on
// the whole of each image batch.
std::vector<std::vector<float>> syncbn_reference(int steps) {
  auto single = conv_bn(3);
  nn::SGD opt(single->parameters(), {.lr = 0.05, .momentum = 0.9});
  train_reference(*single, opt, image_batch, steps);
  return state_of(*single);
}

// With synchronized statistics both ranks end at the reference's state, running statistics
// included, with the same bits; with local statistics (the control) they miss it.
// Relative 1e-3: sums over 2 x 32 instead of 64, in f64 statistics and f32 tensors, carried
// through 10 momentum steps. Local statistics miss it by far (the halves differ).
void match_syncbn_reference(const std::vector<std::vector<std::vector<float>>>& got,
                            const std::vector<std::vector<float>>& expected, bool sync) {
  REQUIRE(got[0].size() == expected.size());
  bool all_close = true;
  for (std::size_t i = 0; i < expected.size(); ++i) {
    for (std::size_t j = 0; j < expected[i].size(); ++j) {
      const bool close = got[0][i][j] == doctest::Approx(expected[i][j]).epsilon(1e-3).scale(1e-3);
      if (sync) REQUIRE_MESSAGE(close, "tensor ", i, " element ", j);
      all_close = all_close && close;
    }
  }
  CHECK(all_close == sync);
  if (sync) CHECK(got[0] == got[1]);
}

// Two host ranks' DDP run of the conv/BatchNorm model (synchronized or local statistics): each
// rank's state; `converted` counts the layers convert_sync_batchnorm turned.
std::vector<std::vector<std::vector<float>>> host_syncbn_run(bool sync, int steps,
                                                             std::vector<int>& converted) {
  std::vector<std::vector<std::vector<float>>> got(2);
  CommOptions options;
  options.name = sync ? "syncbn" : "localbn";
  run_comm(2, "shm", options, [&](int rank, Communicator& comm) {
    auto model = conv_bn(3);
    if (sync) converted[rank] = distributed::convert_sync_batchnorm(*model, comm);
    distributed::DistributedDataParallel ddp(model, comm);
    nn::SGD opt(model->parameters(), {.lr = 0.05, .momentum = 0.9});
    ddp_steps(ddp, opt, image_batch, rank, steps, core::Device::cpu());
    got[rank] = state_of(*model);
  });
  return got;
}

// SyncBatchNorm on devices: as the host test below, each rank on device_of(rank). On the
// emulated device (`as_host`) the run is also the host's, bit for bit: the statistics' sums are
// the CPU kernel's, in its order, and cross ranks through the same host all-reduce, and the
// convolution takes the CPU's decomposition (the deterministic path).
void device_syncbn_equivalence(const std::function<core::Device(int)>& device_of, bool as_host) {
  const tensor::DeterministicGuard exact(as_host);
  constexpr int kSteps = 10;
  const auto expected = syncbn_reference(kSteps);
  for (const bool sync : {true, false}) {
    INFO("sync_bn ", sync);
    std::vector<std::vector<std::vector<float>>> got(2);
    std::vector<int> converted(2, 0);
    run_device_ranks(
        sync ? "dev-syncbn" : "dev-localbn", device_of,
        [&](int rank, core::Device dev, Communicator& comm, collectives::DeviceSpace& space) {
          auto model = conv_bn(3);
          model->to(dev);
          if (sync) converted[rank] = distributed::convert_sync_batchnorm(*model, comm);
          distributed::DistributedDataParallel ddp(model, comm, {.device_space = &space});
          nn::SGD opt(model->parameters(), {.lr = 0.05, .momentum = 0.9});
          ddp_steps(ddp, opt, image_batch, rank, kSteps, dev);
          got[rank] = state_of(*model);
        });
    match_syncbn_reference(got, expected, sync);
    if (sync) CHECK(converted == std::vector<int>{1, 1});
    if (as_host) {
      std::vector<int> host_converted(2, 0);
      CHECK(got == host_syncbn_run(sync, kSteps, host_converted));
    }
  }
}

}  // namespace

TEST_CASE("on the emulated device: 2 ranks x batch 32 match 1 rank x batch 64 (stream-ordered)") {
  device_equivalence([](int rank) { return core::Device::emu(rank); });
}

// The path of CUDA ranks that are threads of one process (device_flags_problem): host-driven,
// its rounds' messages over shm or tcp. Under TSan the tcp case is the one that can pass: each
// rank maps the shm ring itself, even as a thread of one process, so the ring's atomics lie at
// two addresses and TSan, which orders threads by an atomic's address, does not see a message
// order the staging copy before the peer's reduction of it; tcp's sends and receives it does.
TEST_CASE(
    "on the emulated device, without device flags, over shm: 2 ranks x batch 32 match 1 "
    "rank x 64") {
  device_equivalence([](int rank) { return core::Device::emu(rank); },
                     collectives::DeviceFlags::off, "shm");
}

TEST_CASE(
    "on the emulated device, without device flags, over tcp: 2 ranks x batch 32 match 1 "
    "rank x 64") {
  device_equivalence([](int rank) { return core::Device::emu(rank); },
                     collectives::DeviceFlags::off, "tcp");
}

// A DDP step on a device with device flags: the forward's buffer broadcast and the buckets'
// all-reduces are ordered on the streams, so the host waits only where it reads the loss.
void host_waits_per_step(const std::function<core::Device(int)>& device_of) {
  std::vector<device::DeviceCounts> used(2);
  std::vector<collectives::CommCounters> comm_used(2);
  std::vector<std::uint64_t> loss_read_syncs(2);
  std::vector<char> flags(2);  // not vector<bool>: each rank's thread writes its own element
  run_device_ranks(
      "ddp-waits", device_of,
      [&](int rank, core::Device dev, Communicator& comm, collectives::DeviceSpace& space) {
        flags[rank] = space.device_sync();
        auto model = conv_bn(3);  // BatchNorm: buffers broadcast every forward
        model->to(dev);
        distributed::DistributedDataParallel ddp(model, comm, {.device_space = &space});
        nn::SGD opt(model->parameters(), {.lr = 0.05, .momentum = 0.9});
        nn::CrossEntropyLoss loss_fn;
        std::vector<Data> data;
        for (int s = 0; s < 6; ++s) {
          const Data d = image_batch(s);
          data.push_back({tensor::narrow(d.x, 0, rank * 32, 32).contiguous().to(dev),
                          tensor::narrow(d.y, 0, rank * 32, 32).contiguous().to(dev)});
        }
        const auto step = [&](const Data& d) {
          opt.zero_grad();
          Tensor loss = loss_fn.forward(ddp.forward(d.x), d.y);
          loss.backward();
          opt.step();
          return loss;
        };
        step(data[0]);
        step(data[1]).item();  // warmed up: caches filled, kernels chosen
        const auto before = device::device_counts(dev);
        const collectives::CommCounters comm_before = comm.counters();
        Tensor loss;
        for (int s = 2; s < 6; ++s) loss = step(data[s]);
        used[rank] = device::device_counts(dev) - before;
        comm_used[rank] = comm.counters() - comm_before;
        const auto before_read = device::device_counts(dev);
        CHECK(std::isfinite(loss.item()));
        loss_read_syncs[rank] = (device::device_counts(dev) - before_read).host_syncs;
      });
  for (int rank = 0; rank < 2; ++rank) {
    INFO("rank ", rank);
    REQUIRE(flags[rank]);
    CHECK(used[rank].host_syncs == 0);
    CHECK(comm_used[rank].host_waits == 0);
    CHECK(comm_used[rank].host_messages == 0);
    CHECK(comm_used[rank].ops == 8);  // per step: the buffer broadcast and one bucket
    CHECK(loss_read_syncs[rank] == 1);
  }
}

TEST_CASE("on the emulated device: a DDP step waits on the host only where the loss is read") {
  host_waits_per_step([](int rank) { return core::Device::emu(rank); });
}

TEST_CASE("on a CUDA GPU: 2 ranks x batch 32 (both on cuda:0) match 1 rank x batch 64" *
          doctest::skip(!cuda_gpu_present()) *
          doctest::description("needs a CUDA GPU (none here, or built without CUDA)")) {
  device_equivalence([](int) { return core::Device::cuda(0); });
}

TEST_CASE(
    "on the emulated device: SyncBatchNorm, 2 ranks x batch 32 match 1 rank x batch 64 and the "
    "host's run") {
  device_syncbn_equivalence([](int rank) { return core::Device::emu(rank); }, true);
}

TEST_CASE("on a CUDA GPU: SyncBatchNorm, 2 ranks x batch 32 (both on cuda:0) match 1 rank x 64" *
          doctest::skip(!cuda_gpu_present()) *
          doctest::description("needs a CUDA GPU (none here, or built without CUDA)")) {
  device_syncbn_equivalence([](int) { return core::Device::cuda(0); }, false);
}

TEST_CASE("forward broadcasts rank 0's buffers unless broadcast_buffers is off") {
  for (const bool broadcast : {true, false}) {
    CAPTURE(broadcast);
    CommOptions options;
    options.name = broadcast ? "ddp-buffers-on" : "ddp-buffers-off";
    std::vector<std::vector<float>> means(2);
    std::vector<std::int64_t> counters(2);
    run_comm(2, "shm", options, [&](int rank, Communicator& comm) {
      tensor::Generator gen(4);
      auto model = std::make_shared<nn::Sequential>();
      model->add(std::make_shared<nn::BatchNorm2d>(2));
      distributed::DDPOptions ddp_options;
      ddp_options.broadcast_buffers = broadcast;
      distributed::DistributedDataParallel ddp(model, comm, ddp_options);
      // A training forward on different data moves each rank's running statistics apart;
      // rank 1 also changes its batch counter (an i64 buffer).
      tensor::NoGradGuard no_grad;
      ddp.forward(tensor::full({4, 2, 3, 3}, rank + 1.0));
      for (auto& [name, b] : model->named_buffers()) {
        if (rank == 1 && name.find("num_batches") != std::string::npos) {
          b.data<std::int64_t>()[0] = 7;
        }
      }
      model->eval();  // this forward only broadcasts (eval mode leaves the statistics alone)
      ddp.forward(tensor::zeros({4, 2, 3, 3}));
      for (auto& [name, b] : model->named_buffers()) {
        if (name.find("running_mean") != std::string::npos) means[rank] = b.to_vector<float>();
        if (name.find("num_batches") != std::string::npos)
          counters[rank] = b.to_vector<std::int64_t>()[0];
      }
    });
    if (broadcast) {
      CHECK(means[1] == means[0]);  // f32 and i64 buffers both come from rank 0
      CHECK(counters[1] == counters[0]);
      CHECK(counters[0] == 1);
    } else {
      CHECK(means[1] != means[0]);
      CHECK(counters[0] == 1);
      CHECK(counters[1] == 7);
    }
  }
}

namespace {

// Buffers whose bytes are no multiple of 4 (3 x u8, then 3 x f16, then 1 x f32 behind them),
// as the broadcast packs them into 4-byte words; forward passes its input through.
class OddBuffers : public nn::Module {
 public:
  OddBuffers() {
    register_buffer("flags", tensor::zeros({3}, core::DType::u8));
    register_buffer("halves", tensor::zeros({3}, core::DType::f16));
    register_buffer("scale", tensor::zeros({1}));
  }
  tensor::Tensor forward(const tensor::Tensor& input) override { return input; }
  std::string type_name() const override { return "OddBuffers"; }
};

}  // namespace

TEST_CASE("the buffer broadcast carries buffers of any dtype and size, padded to whole words") {
  std::vector<std::vector<std::string>> seen(2);
  CommOptions options;
  options.name = "ddp-odd-buffers";
  run_comm(2, "shm", options, [&](int rank, Communicator& comm) {
    auto model = std::make_shared<OddBuffers>();
    distributed::DistributedDataParallel ddp(model, comm, distributed::DDPOptions{});
    // Each rank moves its buffers apart; the next forward gives every rank rank 0's values.
    for (auto& [name, b] : model->named_buffers()) {
      tensor::NoGradGuard no_grad;
      tensor::fill_(b, rank == 0 ? 5.0 : 9.0);
    }
    ddp.forward(tensor::zeros({1}));
    for (auto& [name, b] : model->named_buffers()) {
      const float last = b.to(core::DType::f32).to_vector<float>().back();
      seen[rank].push_back(core::str(name, "=", last));
    }
  });
  CHECK(seen[0] == std::vector<std::string>{"flags=5", "halves=5", "scale=5"});
  CHECK(seen[1] == seen[0]);
}

TEST_CASE("buckets follow PyTorch's assignment: a bucket closes once it reaches its cap") {
  CommOptions options;
  options.name = "ddp-buckets";
  run_comm(2, "shm", options, [&](int, Communicator& comm) {
    tensor::Generator gen(0);
    // PyTorch 1.13, dist._compute_bucket_assignment_by_size over fmnist_cnn's reversed
    // parameters with limits [1 MiB, 25 MiB]: [[fc2.bias, fc2.weight, fc1.bias, fc1.weight],
    // [the conv and BatchNorm parameters]], 402826 and 19008 elements.
    distributed::DistributedDataParallel cnn(nn::make_model("fmnist_cnn", gen, 10, 1), comm);
    CHECK(cnn.bucket_sizes() == std::vector<std::size_t>{402826, 19008});
    // Caps of 0.25 MiB = 65536 floats. Weights in reverse order: 1000, 40000, 40000, 100000.
    // The first bucket closes at 81000 >= 65536; the large weight fills the next one alone.
    auto model = std::make_shared<nn::Sequential>();
    model->add(std::make_shared<nn::Linear>(1000, 100, gen, false));
    model->add(std::make_shared<nn::Linear>(100, 400, gen, false));
    model->add(std::make_shared<nn::Linear>(400, 100, gen, false));
    model->add(std::make_shared<nn::Linear>(100, 10, gen, false));
    distributed::DDPOptions caps;
    caps.first_bucket_mb = caps.bucket_cap_mb = 0.25;
    distributed::DistributedDataParallel ddp(model, comm, caps);
    CHECK(ddp.bucket_sizes() == std::vector<std::size_t>{1000 + 40000 + 40000, 100000});
  });
}

namespace {

// A trace event of one all-reduce step (DDP's own spans carry no op).
bool is_all_reduce_step(const nlohmann::json& e) {
  return e.value("ph", "") == "X" && e.contains("args") &&
         e["args"].value("op", "") == "all_reduce";
}

}  // namespace

TEST_CASE("the first bucket's all-reduce starts before backward's last gradient") {
  namespace fs = std::filesystem;
  const fs::path dir = ringlet::testing::process_temp_path("ringlet_ddp_trace");
  fs::remove_all(dir);
  CommOptions options;
  options.name = "ddp-overlap";
  options.trace_dir = dir.string();
  std::vector<double> last_grad_us(2);
  run_comm(2, "shm", options, [&](int rank, Communicator& comm) {
    tensor::Generator gen(5);
    auto model = std::make_shared<nn::Sequential>();
    for (int i = 0; i < 6; ++i) {  // ~1.6 MB of parameters: several buckets
      model->add(std::make_shared<nn::Linear>(256, 256, gen));
      model->add(std::make_shared<nn::ReLU>());
    }
    distributed::DDPOptions ddp_options;
    ddp_options.first_bucket_mb = 0.3;
    ddp_options.bucket_cap_mb = 0.3;
    distributed::DistributedDataParallel ddp(model, comm, ddp_options);
    CHECK(ddp.num_buckets() >= 3);
    const Tensor x = tensor::randn({512, 256}, gen);
    // The first layer's weight is the last gradient backward computes (before it waits for the
    // buckets).
    model->parameters()[0].register_hook([&, rank](const Tensor&) {
      last_grad_us[rank] = std::chrono::duration<double, std::micro>(
                               std::chrono::steady_clock::now().time_since_epoch())
                               .count();
    });
    tensor::mean(ddp.forward(x)).backward();
  });
  for (int r = 0; r < 2; ++r) {
    std::ifstream in(dir / ("trace.rank" + std::to_string(r) + ".json"));
    REQUIRE(in.good());
    const auto json = nlohmann::json::parse(in);
    double first_start = 1e300;
    for (const auto& e : json["traceEvents"]) {
      if (is_all_reduce_step(e)) {
        first_start = std::min(first_start, e["ts"].get<double>());
      }
    }
    INFO("rank ", r, ": first all-reduce step at ", first_start, " us, the last gradient at ",
         last_grad_us[r]);
    CHECK(first_start < last_grad_us[r]);
  }
  fs::remove_all(dir);
}

// One backward of each rank's half of batch(0) through DDP with `hook`: the averaged gradients
// (rank 0's) and the bytes rank 0's all-reduce steps moved (from the trace).
struct HookedGrads {
  std::vector<std::vector<float>> grads;
  std::uint64_t wire_bytes = 0;
  std::uint64_t ready_bytes = 0;  // the "bucket k ready" instants' bytes
};

HookedGrads hooked_grads(distributed::CommHook hook, const std::string& name) {
  namespace fs = std::filesystem;
  const fs::path dir = ringlet::testing::process_temp_path("ringlet_ddp_hook_" + name);
  fs::remove_all(dir);
  CommOptions options;
  options.name = "ddp-hook-" + name;
  options.trace_dir = dir.string();
  HookedGrads out;
  run_comm(2, "shm", options, [&](int rank, Communicator& comm) {
    auto model = mlp(1);
    distributed::DistributedDataParallel ddp(model, comm, {.comm_hook = hook});
    const Data d = batch(0);
    const Tensor x = tensor::narrow(d.x, 0, rank * 32, 32);
    const Tensor y = tensor::narrow(d.y, 0, rank * 32, 32).contiguous();
    nn::CrossEntropyLoss().forward(ddp.forward(x), y).backward();
    if (rank != 0) return;
    for (auto& p : model->parameters()) out.grads.push_back(p.grad().to_vector<float>());
  });
  std::ifstream in(dir / "trace.rank0.json");
  const nlohmann::json trace = nlohmann::json::parse(in);
  for (const auto& e : trace.at("traceEvents")) {
    if (is_all_reduce_step(e)) {
      out.wire_bytes += e["args"]["bytes"].get<std::uint64_t>();
    } else if (e.value("ph", "") == "i" && e.value("cat", "") == "ddp") {
      out.ready_bytes += e["args"]["bytes"].get<std::uint64_t>();
    }
  }
  fs::remove_all(dir);
  return out;
}

// Rank `rank`'s own gradient of its half of batch(0), without DDP.
std::vector<std::vector<float>> local_grads(int rank) {
  auto model = mlp(1);
  const Data d = batch(0);
  const Tensor x = tensor::narrow(d.x, 0, rank * 32, 32);
  const Tensor y = tensor::narrow(d.y, 0, rank * 32, 32).contiguous();
  nn::CrossEntropyLoss().forward(model->forward(x), y).backward();
  std::vector<std::vector<float>> out;
  for (auto& p : model->parameters()) out.push_back(p.grad().to_vector<float>());
  return out;
}

TEST_CASE("comm hooks fp16_compress and bf16_compress: half the bytes, the average rounded") {
  const HookedGrads exact = hooked_grads(distributed::CommHook::none, "none");
  REQUIRE(exact.wire_bytes > 0);
  REQUIRE(exact.ready_bytes > 0);
  const auto g0 = local_grads(0), g1 = local_grads(1);
  // Each half g_r / 2 is rounded to the wire format (unit roundoff u: 2^-11 for f16's 11
  // significant bits, 2^-8 for bf16's 8), and so is their sum: the error is at most
  // u (|g0| + |g1|) / 2 + u |sum|, plus f16's subnormal spacing (6e-8) near zero.
  struct Case {
    distributed::CommHook hook;
    std::string name;
    double u;
  };
  for (const Case& c : {Case{distributed::CommHook::fp16_compress, "fp16", 0x1p-11},
                        Case{distributed::CommHook::bf16_compress, "bf16", 0x1p-8}}) {
    const HookedGrads got = hooked_grads(c.hook, c.name);
    const double u = c.u;
    INFO(c.name);
    CHECK(got.wire_bytes * 2 == exact.wire_bytes);
    CHECK(got.ready_bytes * 2 == exact.ready_bytes);
    REQUIRE(got.grads.size() == exact.grads.size());
    std::size_t rounded = 0, total = 0;
    for (std::size_t i = 0; i < got.grads.size(); ++i) {
      for (std::size_t j = 0; j < got.grads[i].size(); ++j) {
        const double want = exact.grads[i][j], have = got.grads[i][j];
        const double bound =
            u * (std::fabs(g0[i][j]) + std::fabs(g1[i][j])) / 2 + u * std::fabs(want) + 1.2e-7;
        REQUIRE(std::fabs(have - want) <= bound * 1.01);
        rounded += have != want ? 1 : 0;
        ++total;
      }
    }
    CHECK(rounded > total / 4);  // the hook ran: most values lost bits
  }
  CHECK_THROWS_WITH_AS(distributed::parse_comm_hook("fp8_compress"),
                       doctest::Contains("valid: none, fp16_compress, bf16_compress"),
                       core::ValueError);
}

TEST_CASE("DistributedSampler: disjoint, covering, equal, reshuffled, identical across ranks") {
  for (std::int64_t n : {10, 11, 3}) {
    for (int world : {1, 2, 3, 4}) {
      std::multiset<std::int64_t> all;
      std::vector<std::vector<std::int64_t>> shards;
      for (int r = 0; r < world; ++r) {
        data::DistributedSampler s(n, world, r, true, 7);
        s.set_epoch(2);
        shards.push_back(s.indices());
        CHECK(static_cast<std::int64_t>(shards.back().size()) == (n + world - 1) / world);
        all.insert(shards.back().begin(), shards.back().end());
      }
      for (std::int64_t i = 0; i < n; ++i) CHECK(all.count(i) >= 1);  // covers
      CHECK(static_cast<std::int64_t>(all.size()) - n < world);       // padding only
      data::DistributedSampler again(n, world, 0, true, 7);
      again.set_epoch(2);
      CHECK(again.indices() == shards[0]);  // same (seed, epoch): same shard
      again.set_epoch(3);
      if (n >= 10) CHECK(again.indices() != shards[0]);  // set_epoch reshuffles
      data::DistributedSampler dropped(n, world, world - 1, true, 7, /*drop_last=*/true);
      CHECK(static_cast<std::int64_t>(dropped.indices().size()) == n / world);
    }
  }
  CHECK_THROWS_AS(data::DistributedSampler(10, 2, 2), core::ValueError);
}

TEST_CASE("SyncBatchNorm: 2 ranks x batch 32 match 1 rank x batch 64, running stats included") {
  constexpr int kSteps = 10;
  const auto expected = syncbn_reference(kSteps);
  for (const bool sync : {true, false}) {
    INFO("sync_bn ", sync);
    std::vector<int> converted(2, 0);
    match_syncbn_reference(host_syncbn_run(sync, kSteps, converted), expected, sync);
    if (sync) CHECK(converted == std::vector<int>{1, 1});
  }
}
