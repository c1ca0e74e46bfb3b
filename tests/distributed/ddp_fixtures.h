// DDP tests' models, data, single-process references and checks (test_ddp.cpp on the host,
// test_ddp_device.cpp on devices): 2 ranks x batch 32 must end where 1 rank x batch 64 does.
#pragma once

#include <doctest/doctest.h>

#include <cstdint>
#include <memory>
#include <vector>

#include "comm_ranks.h"
#include "distributed/ddp.h"
#include "distributed/sync_batch_norm.h"
#include "nn/activation.h"
#include "nn/batch_norm.h"
#include "nn/conv2d.h"
#include "nn/flatten.h"
#include "nn/linear.h"
#include "nn/loss.h"
#include "nn/sequential.h"
#include "nn/sgd.h"
#include "tensor/ops.h"

namespace ringlet::testing {

using tensor::Tensor;

inline std::shared_ptr<nn::Sequential> mlp(std::uint64_t seed) {
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
inline std::shared_ptr<nn::Sequential> conv_bn(std::uint64_t seed) {
  tensor::Generator gen(seed);
  auto m = std::make_shared<nn::Sequential>();
  m->add(std::make_shared<nn::Conv2d>(2, 4, 3, gen, nn::Conv2dOptions{.padding = 1}));
  m->add(std::make_shared<nn::BatchNorm2d>(4));
  m->add(std::make_shared<nn::ReLU>());
  m->add(std::make_shared<nn::Flatten>());
  m->add(std::make_shared<nn::Linear>(4 * 36, 10, gen));
  return m;
}

inline Data image_batch(int step) {
  tensor::Generator gen(2000 + step);
  // a per-sample offset makes the two halves' statistics differ from the whole batch's
  Tensor x = tensor::add(tensor::randn({64, 2, 6, 6}, gen),
                         tensor::reshape(tensor::arange(64, tensor::DType::f32), {64, 1, 1, 1}));
  return {x, tensor::randint(0, 10, {64}, gen)};
}

inline Data batch(int step) {
  tensor::Generator gen(1000 + step);
  return {tensor::randn({64, 20}, gen), tensor::randint(0, 10, {64}, gen)};
}

// The single-process reference: `steps` SGD steps of cross-entropy on batch(0), batch(1), ...
inline void train_reference(nn::Module& model, nn::SGD& opt, Data (*batch)(int), int steps) {
  nn::CrossEntropyLoss loss_fn;
  for (int s = 0; s < steps; ++s) {
    const Data d = batch(s);
    opt.zero_grad();
    loss_fn.forward(model.forward(d.x), d.y).backward();
    opt.step();
  }
}

inline std::vector<std::vector<float>> params_of(nn::Module& m) {  // read back from any device
  std::vector<std::vector<float>> out;
  for (auto& p : m.parameters()) out.push_back(p.to(core::Device::cpu()).to_vector<float>());
  return out;
}

// The MLP's parameters after `steps` SGD steps of one rank on the whole of each batch.
inline std::vector<std::vector<float>> reference_params(int steps) {
  auto single = mlp(1);
  nn::SGD opt(single->parameters(), {.lr = 0.1, .momentum = 0.9, .weight_decay = 1e-4});
  train_reference(*single, opt, batch, steps);
  return params_of(*single);
}

inline std::vector<std::vector<float>> state_of(nn::Module& m) {
  std::vector<std::vector<float>> out = params_of(m);
  for (auto& [name, b] : m.named_buffers()) {
    if (b.dtype() == tensor::DType::f32)
      out.push_back(b.to(core::Device::cpu()).to_vector<float>());
  }
  return out;
}

// `steps` DDP steps of rank `rank`'s half (32) of batch(0), batch(1), ..., on `device`.
inline void ddp_steps(distributed::DistributedDataParallel& ddp, nn::SGD& opt, Data (*batch)(int),
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
inline void match_reference(const std::vector<std::vector<std::vector<float>>>& got,
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

// The conv/BatchNorm model's parameters and buffers after `steps` SGD steps of one rank on
// the whole of each image batch.
inline std::vector<std::vector<float>> syncbn_reference(int steps) {
  auto single = conv_bn(3);
  nn::SGD opt(single->parameters(), {.lr = 0.05, .momentum = 0.9});
  train_reference(*single, opt, image_batch, steps);
  return state_of(*single);
}

// With synchronized statistics both ranks end at the reference's state, running statistics
// included, with the same bits; with local statistics (the control) they miss it.
// Relative 1e-3: sums over 2 x 32 instead of 64, in f64 statistics and f32 tensors, carried
// through 10 momentum steps. Local statistics miss it by far (the halves differ).
inline void match_syncbn_reference(const std::vector<std::vector<std::vector<float>>>& got,
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
inline std::vector<std::vector<std::vector<float>>> host_syncbn_run(bool sync, int steps,
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

}  // namespace ringlet::testing
