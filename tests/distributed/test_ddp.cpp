// DDP: 2 ranks x batch 32 end with the parameters of 1 rank x batch 64 on the same data; the
// first bucket's all-reduce starts before backward ends (trace); the fp16 / bf16 compression
// hooks halve the bytes all-reduced (trace) and round the average; parameters start from rank
// 0's values (how backward finishes a step: test_ddp_backward.cpp). DistributedSampler shards
// are disjoint, cover, equal and reshuffle.
// SyncBatchNorm: 2 ranks x 32 with synchronized statistics match 1 rank x 64, buffers included
// (and plain BatchNorm, as a control, does not). On devices: test_ddp_device.cpp.
#include <doctest/doctest.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <set>
#include <thread>

#include "collectives/trace.h"
#include "comm_ranks.h"
#include "data/distributed_sampler.h"
#include "ddp_fixtures.h"
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
    // buckets). Its hook holds backward 50 ms, then notes the time: a bucket launched during
    // backward has started by then even when the comm thread waits a scheduling quantum for a
    // core (2 cores, a sanitizer); one launched only once backward ends has not.
    model->parameters()[0].register_hook([&, rank](const Tensor&) {
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
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
