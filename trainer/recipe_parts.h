// What a training run is built from, each a function of its config: the model (initialized
// from the seed), the optimizer, the lr schedule, the compute precision and the evaluation's
// options. The training loop (train.cpp), `ringlet eval` (evaluate.cpp) and a resume that must
// rebuild its schedule (schedule_resume.h) build them here alike.
#pragma once

#include <memory>

#include "collectives/communicator.h"
#include "core/dtype.h"
#include "nn/lr_schedule.h"
#include "nn/module.h"
#include "nn/optimizer.h"
#include "trainer/config.h"
#include "trainer/train.h"

namespace ringlet::trainer {

// The model the config names, shaped for the dataset's images and classes.
std::shared_ptr<nn::Module> build_model(const TrainConfig& c);
EvalOptions eval_options(const TrainConfig& c, collectives::Communicator* comm);
std::unique_ptr<nn::Optimizer> make_optimizer(const TrainConfig& c, nn::Module& model);
// Null for a constant lr.
std::unique_ptr<nn::LRScheduler> make_schedule(const TrainConfig& c, nn::Optimizer& opt);
core::DType precision_of(const TrainConfig& c);

}  // namespace ringlet::trainer
