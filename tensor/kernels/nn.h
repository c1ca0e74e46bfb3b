// Per-element and per-row bodies of the network ops (convolution's im2col/col2im, max and
// average pooling, softmax lanes, cross-entropy rows, argmax lanes, gather, SGD and Adam), written
// once for the device kernels (device_kernels_impl.h) on CUDA and the emulated GPU. Each body
// computes in the order the CPU kernel does (the same sums in the same order), so the emulated
// device matches the CPU bit for bit where the CPU does not reorder for speed.
// One header per op family under nn/, as tensor/ops/ is split.
#pragma once

#include "tensor/kernels/nn/batch_norm.h"
#include "tensor/kernels/nn/conv.h"
#include "tensor/kernels/nn/dropout.h"
#include "tensor/kernels/nn/gather.h"
#include "tensor/kernels/nn/optim.h"
#include "tensor/kernels/nn/pool.h"
#include "tensor/kernels/nn/softmax_loss.h"
