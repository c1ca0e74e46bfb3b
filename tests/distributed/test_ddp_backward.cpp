// How a DDP step finishes: backward itself waits for the buckets and leaves the averages in
// .grad (PyTorch's loop, `backward(); step()`, needs nothing else); a backward that left some
// parameters without a gradient leaves the step open, and the next forward refuses it, naming
// them; a second backward of the same step may close it; finish_gradient_sync() is the explicit
// form; unused parameters with find_unused_parameters, and no_sync's local accumulation.
#include <doctest/doctest.h>

#include <memory>
#include <vector>

#include "comm_ranks.h"
#include "distributed/ddp.h"
#include "nn/linear.h"
#include "tensor/ops.h"

using namespace ringlet;
using namespace ringlet::testing;
using tensor::Tensor;

namespace {

// A module with a second layer its forward uses only when asked to.
class TwoHeads : public nn::Module {
 public:
  explicit TwoHeads(tensor::Generator& gen)
      : used_(register_module("used", std::make_shared<nn::Linear>(4, 4, gen))),
        spare_(register_module("spare", std::make_shared<nn::Linear>(4, 4, gen))) {}
  Tensor forward(const Tensor& x) override { return used_->forward(x); }
  std::string type_name() const override { return "TwoHeads"; }
  nn::Linear& used() { return *used_; }
  nn::Linear& spare() { return *spare_; }

 private:
  std::shared_ptr<nn::Linear> used_, spare_;
};

std::vector<std::vector<float>> grads_of(nn::Module& m) {
  std::vector<std::vector<float>> out;
  for (auto& p : m.parameters()) out.push_back(p.grad().to_vector<float>());
  return out;
}

// Rank r's batch: different on every rank, so only a reduction makes the gradients agree.
Tensor batch_of(int rank) {
  tensor::Generator gen(100 + rank);
  return tensor::randn({8, 4}, gen);
}

}  // namespace

TEST_CASE("backward alone leaves every rank the average gradient: PyTorch's loop is a DDP step") {
  // The reference: each rank's own gradient, averaged by hand.
  std::vector<std::vector<std::vector<float>>> local(2), reduced(2);
  for (int rank = 0; rank < 2; ++rank) {
    tensor::Generator gen(3);
    nn::Linear layer(4, 4, gen);
    tensor::sum(tensor::mul(layer.forward(batch_of(rank)), 0.5)).backward();
    local[rank] = grads_of(layer);
  }
  for (const bool view : {false, true}) {
    CAPTURE(view);
    CommOptions options;
    options.name = view ? "ddp-bwd-view" : "ddp-bwd";
    run_comm(2, "shm", options, [&](int rank, Communicator& comm) {
      tensor::Generator gen(3);
      auto layer = std::make_shared<nn::Linear>(4, 4, gen);
      distributed::DistributedDataParallel ddp(layer, comm, {.gradient_as_bucket_view = view});
      tensor::sum(tensor::mul(ddp.forward(batch_of(rank)), 0.5)).backward();
      reduced[rank] = grads_of(*layer);  // no finish_gradient_sync()
      ddp.finish_gradient_sync();        // the explicit form: nothing left to do
      CHECK(grads_of(*layer) == reduced[rank]);
    });
    CHECK(reduced[0] == reduced[1]);
    for (std::size_t p = 0; p < reduced[0].size(); ++p) {
      for (std::size_t i = 0; i < reduced[0][p].size(); ++i) {
        CHECK(reduced[0][p][i] ==
              doctest::Approx((local[0][p][i] + local[1][p][i]) / 2).epsilon(1e-6));
      }
    }
  }
}

TEST_CASE("a step left open is refused by the next forward, naming what had no gradient") {
  std::vector<std::vector<std::vector<float>>> after(2);
  CommOptions options;
  options.name = "ddp-open";
  run_comm(2, "shm", options, [&](int rank, Communicator& comm) {
    tensor::Generator gen(3);
    auto model = std::make_shared<TwoHeads>(gen);
    distributed::DistributedDataParallel ddp(model, comm);
    const Tensor x = batch_of(rank);
    tensor::sum(ddp.forward(x)).backward();  // "spare" never used: the step stays open
    CHECK_THROWS_WITH_AS(ddp.forward(x),
                         doctest::Contains("expected the previous step's gradient reduction to "
                                           "have finished before a new forward; these parameters "
                                           "received no gradient in its backward: spare.weight, "
                                           "spare.bias"),
                         core::ValueError);
    // The open step was given up with the error: the next step starts clean, and a backward
    // that uses every parameter finishes it.
    model->zero_grad();
    tensor::sum(tensor::add(ddp.forward(x), model->spare().forward(x))).backward();
    after[rank] = grads_of(*model);
    CHECK_NOTHROW(ddp.forward(x));
  });
  REQUIRE(after[0].size() == 4);
  CHECK(after[0] == after[1]);  // each rank's own batch: equal only once averaged
}

TEST_CASE("a second backward of the same step brings the missing gradients and finishes it") {
  std::vector<std::vector<std::vector<float>>> grads(2);
  CommOptions options;
  options.name = "ddp-two-losses";
  run_comm(2, "shm", options, [&](int rank, Communicator& comm) {
    tensor::Generator gen(3);
    auto model = std::make_shared<TwoHeads>(gen);
    distributed::DistributedDataParallel ddp(model, comm);
    const Tensor x = batch_of(rank);
    tensor::sum(ddp.forward(x)).backward();                               // the "used" layer
    tensor::sum(model->spare().forward(tensor::mul(x, 2.0))).backward();  // then "spare"
    grads[rank] = grads_of(*model);
    CHECK_NOTHROW(ddp.forward(x));  // closed by the second backward
  });
  CHECK(grads[0] == grads[1]);
  // d sum(spare(2x)) / d spare.bias = 8 on every rank: the average is 8 as well.
  CHECK(grads[0][3] == std::vector<float>(4, 8.0f));
}

TEST_CASE("unused parameters, find_unused_parameters and no_sync") {
  CommOptions options;
  options.name = "ddp-unused";
  run_comm(2, "shm", options, [&](int rank, Communicator& comm) {
    tensor::Generator gen(3);
    auto model = std::make_shared<TwoHeads>(gen);
    const Tensor x = tensor::randn({8, 4}, gen);
    {
      distributed::DistributedDataParallel ddp(model, comm);
      tensor::sum(model->forward(x)).backward();  // "spare" never used
      CHECK_THROWS_WITH_AS(ddp.finish_gradient_sync(),
                           doctest::Contains("spare.weight, spare.bias"), core::ValueError);
    }
    model->zero_grad();
    distributed::DDPOptions find;
    find.find_unused_parameters = true;
    distributed::DistributedDataParallel ddp(model, comm, find);
    tensor::sum(ddp.forward(x)).backward();  // finished by backward, spare's share zeros
    CHECK(model->spare().parameters()[0].grad().to_vector<float>() == std::vector<float>(16, 0.0f));
    // no_sync: local accumulation, then one synchronized backward averages the sum
    model->zero_grad();
    const Tensor local = tensor::full({8, 4}, rank + 1.0);
    {
      auto guard = ddp.no_sync();
      tensor::sum(ddp.forward(local)).backward();
    }
    tensor::sum(ddp.forward(local)).backward();
    // d sum / d bias = 8 per backward; two backwards: 16 on every rank
    CHECK(model->used().parameters()[1].grad().to_vector<float>() == std::vector<float>(4, 16.0f));
  });
}
