// train_cifar: the torchrun primer's loop (a model of your own, DistributedSampler with set_epoch,
// DDP, rank 0 saving a checkpoint each epoch, every rank resuming from it), on the CIFAR-10
// binary files of --data_dir, or on generated CIFAR-shaped images when none is given:
//   ringlet launch --nproc-per-node 2 ./train_cifar --epochs 3 --out run [--device cpu|emu|cuda]
// Run it again with more --epochs and the same --out: it resumes after the last saved epoch.
#include <chrono>
#include <cstdio>
#include <exception>
#include <filesystem>
#include <string>

#include <ringlet/checkpoint/checkpoint.h>
#include <ringlet/data/cifar_dataset.h>
#include <ringlet/data/data_loader.h>
#include <ringlet/data/distributed_sampler.h>
#include <ringlet/distributed/ddp.h>
#include <ringlet/distributed/process_group.h>
#include <ringlet/nn/batch_norm.h>
#include <ringlet/nn/conv2d.h>
#include <ringlet/nn/linear.h>
#include <ringlet/nn/loss.h>
#include <ringlet/nn/pooling.h>
#include <ringlet/nn/residual.h>
#include <ringlet/nn/sgd.h>
#include <ringlet/tensor/ops.h>

using namespace ringlet;
using tensor::Tensor;

// A small ResNet of your own: a stem, two residual blocks, global pooling, a classifier.
class SmallResNet : public nn::Module {
 public:
  explicit SmallResNet(tensor::Generator& gen)
      : stem_(register_module(
            "stem", std::make_shared<nn::Conv2d>(3, 16, 3, gen, nn::Conv2dOptions{.padding = 1}))),
        bn_(register_module("bn", std::make_shared<nn::BatchNorm2d>(16))),
        block1_(register_module("block1", std::make_shared<nn::BasicBlock>(16, 16, 1, gen))),
        block2_(register_module("block2", std::make_shared<nn::BasicBlock>(16, 32, 2, gen))),
        pool_(register_module("pool", std::make_shared<nn::AdaptiveAvgPool2d>(1))),
        fc_(register_module("fc", std::make_shared<nn::Linear>(32, 10, gen))) {}
  Tensor forward(const Tensor& x) override {
    Tensor h = tensor::relu(bn_->forward(stem_->forward(x)));
    h = pool_->forward(block2_->forward(block1_->forward(h)));
    return fc_->forward(tensor::reshape(h, {x.shape()[0], 32}));
  }
  std::string type_name() const override { return "SmallResNet"; }

 private:
  std::shared_ptr<nn::Module> stem_, bn_, block1_, block2_, pool_, fc_;
};

// 1024 CIFAR-shaped images whose class shifts one channel: something to learn without files.
class GeneratedImages : public data::Dataset {
 public:
  std::int64_t size() const override { return 1024; }
  data::Example get(std::int64_t i) const override {
    tensor::Generator gen(static_cast<std::uint64_t>(i));
    const std::int64_t label = i % 10;
    Tensor image = tensor::randn({3, 32, 32}, gen);
    Tensor channel = tensor::narrow(image, 0, label % 3, 1);  // a view: adds in place
    tensor::add_(channel, static_cast<double>(label) / 3.0 - 1.5);
    return {image, label};
  }
};

std::string flag(int argc, char** argv, const std::string& name, const std::string& fallback) {
  for (int i = 1; i + 1 < argc; ++i) {
    if (argv[i] == "--" + name) return argv[i + 1];
  }
  return fallback;
}

// --help, or a flag it does not know: the usage (before anything is trained or written).
int usage_status(int argc, char** argv) {
  static const char* const kFlags[] = {"--epochs", "--out", "--data_dir", "--device"};
  for (int i = 1; i < argc; i += 2) {
    const std::string arg = argv[i];
    bool known = false;
    for (const char* f : kFlags) known = known || (arg == f && i + 1 < argc);
    if (known) continue;
    std::printf(
        "usage: ringlet launch --nproc-per-node N %s [--epochs 3] [--out train_cifar_run]"
        " [--data_dir DIR] [--device cpu|emu|cuda]\n",
        argv[0]);
    return arg == "--help" || arg == "-h" ? 0 : 2;
  }
  return -1;
}

int train(int argc, char** argv) {
  const int epochs = std::stoi(flag(argc, argv, "epochs", "3"));
  const std::filesystem::path out = flag(argc, argv, "out", "train_cifar_run");
  const std::string data_dir = flag(argc, argv, "data_dir", "");
  const auto deadline = core::Deadline::after(std::chrono::seconds(120));
  distributed::DistributedContext job = distributed::join_from_environment("cifar", deadline);
  const int rank = job.comm->rank(), world = job.comm->size();
  const core::Device device = distributed::rank_device(flag(argc, argv, "device", "cpu"), job.info);
  if (!device.is_cpu()) distributed::attach_device(job, "cifar", device, deadline);

  tensor::Generator init(0);
  auto model = std::make_shared<SmallResNet>(init);
  nn::SGD optimizer(model->parameters(), {.lr = 0.05, .momentum = 0.9});
  const std::filesystem::path snapshot = checkpoint::checkpoint_path(out);
  std::int64_t first_epoch = 0;
  std::filesystem::create_directories(out);
  if (std::filesystem::exists(snapshot)) {  // every rank resumes from rank 0's last save
    first_epoch = checkpoint::load_checkpoint(snapshot, *model, &optimizer).epoch;
    std::printf("rank %d: resumed after epoch %lld\n", rank, static_cast<long long>(first_epoch));
  }
  model->to(device);
  distributed::DistributedDataParallel ddp(model, *job.comm, {.device_space = job.space.get()});

  std::shared_ptr<const data::Dataset> data = std::make_shared<GeneratedImages>();
  std::shared_ptr<const data::Transform> transform;  // u8 pixels to [0, 1] for the files'
  if (!data_dir.empty()) {
    data = std::make_shared<data::CifarDataset>(data::CifarDataset::open(data_dir, {}));
    transform = std::make_shared<data::ToFloat>();
  }
  auto sampler = std::make_shared<data::DistributedSampler>(data->size(), world, rank);
  data::DataLoader loader(data, {.batch_size = 32}, transform, sampler);
  nn::CrossEntropyLoss loss_fn;
  for (std::int64_t epoch = first_epoch; epoch < epochs; ++epoch) {
    sampler->set_epoch(epoch);  // a new shuffle each epoch, the same on every rank
    data::EpochIterator batches = loader.begin_epoch(epoch);
    double total = 0, steps = 0;
    while (auto batch = batches.next()) {
      optimizer.zero_grad();
      Tensor loss =
          loss_fn.forward(ddp.forward(batch->images.to(device)), batch->labels.to(device));
      loss.backward();  // ends once DDP's all-reduces are done
      optimizer.step();
      total += loss.item();
      ++steps;
    }
    std::printf("rank %d epoch %lld: mean loss %.4f\n", rank, static_cast<long long>(epoch + 1),
                total / steps);
    if (rank == 0) checkpoint::save_checkpoint(snapshot, *model, &optimizer, {.epoch = epoch + 1});
    job.comm->barrier()->wait(deadline);  // the save is complete before anyone goes on
  }
  return 0;
}

int main(int argc, char** argv) {
  if (const int status = usage_status(argc, argv); status >= 0) return status;
  try {
    return train(argc, argv);
  } catch (const std::exception& e) {  // a device that is not here, a corrupt snapshot, ...
    std::fprintf(stderr, "train_cifar: %s\n", e.what());
    return 1;
  }
}
