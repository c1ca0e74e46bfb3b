// Divergence checks on a model's and an optimizer's state: the name of the first parameter,
// floating-point buffer or optimizer state entry (a momentum buffer, Adam's moments, a scalar)
// holding NaN or an infinity (read from any device), or "" when every value is finite. The loop
// stops on the model's after an epoch (before that epoch's checkpoint replaces the last good
// one), and a resume refuses a checkpoint that holds such values anywhere.
#pragma once

#include <string>

#include "nn/module.h"
#include "nn/optimizer.h"

namespace ringlet::trainer {

std::string first_non_finite(const nn::Module& model);
// "optimizer state '<key>'" (PyTorch's key, e.g. state.3.momentum_buffer) or "".
std::string first_non_finite(const nn::Optimizer& optimizer);

}  // namespace ringlet::trainer
