// Everything the tensor layer offers, in one include.
#pragma once

#include "tensor/autograd.h"
#include "tensor/determinism.h"
#include "tensor/generator.h"
#include "tensor/math_mode.h"
#include "tensor/ops/conv.h"
#include "tensor/ops/creation.h"
#include "tensor/ops/dropout.h"
#include "tensor/ops/elementwise.h"
#include "tensor/ops/index.h"
#include "tensor/ops/loss.h"
#include "tensor/ops/matmul.h"
#include "tensor/ops/movement.h"
#include "tensor/ops/norm.h"
#include "tensor/ops/pool.h"
#include "tensor/ops/reduce.h"
#include "tensor/tensor.h"
