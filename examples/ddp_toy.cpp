// ddp_toy: the ToyModel of PyTorch's "Getting Started with Distributed Data Parallel" (Linear
// 10 -> 10, ReLU, Linear 10 -> 5; MSE loss; SGD), trained a few steps under DDP on each rank's
// own random batch. Run under the launcher:
//   ringlet launch --nproc-per-node 2 ./ddp_toy
// Each rank prints its loss per step; at the end the ranks compare their parameters (DDP keeps
// them equal) and rank 0 says whether the loss fell.
#include <chrono>
#include <cstdio>
#include <memory>
#include <string>

#include <ringlet/distributed/ddp.h>
#include <ringlet/distributed/process_group.h>
#include <ringlet/nn/activation.h>
#include <ringlet/nn/linear.h>
#include <ringlet/nn/loss.h>
#include <ringlet/nn/sequential.h>
#include <ringlet/nn/sgd.h>
#include <ringlet/tensor/ops.h>

namespace {

using namespace ringlet;

std::shared_ptr<nn::Sequential> toy_model() {
  tensor::Generator gen(0);
  auto model = std::make_shared<nn::Sequential>();
  model->add(std::make_shared<nn::Linear>(10, 10, gen));
  model->add(std::make_shared<nn::ReLU>());
  model->add(std::make_shared<nn::Linear>(10, 5, gen));
  return model;
}

// The same number on every rank when the ranks hold the same parameters: their sum, and the
// smallest and largest of it over the ranks.
bool parameters_agree(nn::Module& model, collectives::Communicator& comm, core::Deadline d) {
  double sum = 0;
  for (const auto& p : model.parameters()) sum += tensor::sum(p).item();
  double lo = sum, hi = sum;
  comm.all_reduce(&lo, &lo, 1, core::DType::f64, collectives::ReduceOp::min)->wait(d);
  comm.all_reduce(&hi, &hi, 1, core::DType::f64, collectives::ReduceOp::max)->wait(d);
  return lo == hi;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc > 1) {  // no flags: --help (or anything) prints how to run it
    std::printf(
        "usage: ringlet launch --nproc-per-node N %s\n"
        "trains PyTorch's ToyModel 20 steps under DDP; the ranks end with equal "
        "parameters\n",
        argv[0]);
    return std::string(argv[1]) == "--help" || std::string(argv[1]) == "-h" ? 0 : 2;
  }
  const auto deadline = core::Deadline::after(std::chrono::seconds(60));
  distributed::DistributedContext job = distributed::join_from_environment("ddp_toy", deadline);
  const int rank = job.comm->rank();

  auto model = toy_model();
  distributed::DistributedDataParallel ddp(model, *job.comm);  // DDP(model)
  nn::SGD optimizer(model->parameters(), {.lr = 0.01});
  nn::MSELoss loss_fn;

  tensor::Generator data(1000 + rank);  // each rank its own batch
  const tensor::Tensor inputs = tensor::randn({20, 10}, data);
  const tensor::Tensor labels = tensor::randn({20, 5}, data);
  double first = 0, last = 0;
  for (int step = 0; step < 20; ++step) {
    optimizer.zero_grad();
    tensor::Tensor loss = loss_fn.forward(ddp.forward(inputs), labels);
    loss.backward();  // the buckets' all-reduces start as gradients are ready; backward waits
    optimizer.step();
    last = loss.item();
    if (step == 0) first = last;
    if (step % 5 == 0) std::printf("rank %d step %2d: loss %.5f\n", rank, step, last);
  }
  const bool equal = parameters_agree(*model, *job.comm, deadline);
  std::printf("rank %d: loss %.5f -> %.5f (%s); parameters equal on every rank: %s\n", rank, first,
              last, last < first ? "fell" : "did not fall", equal ? "yes" : "NO");
  return equal && last < first ? 0 : 1;
}
