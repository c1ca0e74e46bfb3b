// Divergence checks on a model's state: the name of the first parameter or floating-point
// buffer holding NaN or an infinity (read from any device), or "" when every value is finite.
// The loop stops on it after an epoch (before that epoch's checkpoint replaces the last good
// one), and a resume refuses a checkpoint that holds such values.
#pragma once

#include <string>

#include "nn/module.h"

namespace ringlet::trainer {

std::string first_non_finite(const nn::Module& model);

}  // namespace ringlet::trainer
