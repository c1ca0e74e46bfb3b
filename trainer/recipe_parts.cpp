// The parts of a run; see recipe_parts.h.
#include "trainer/recipe_parts.h"

#include "nn/adam.h"
#include "nn/models.h"
#include "nn/sgd.h"
#include "tensor/generator.h"
#include "trainer/input_pipeline.h"

namespace ringlet::trainer {

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

}  // namespace ringlet::trainer
