// convert_sync_batchnorm, as torch.nn.SyncBatchNorm.convert_sync_batchnorm: every BatchNorm2d
// of a module normalizes with the statistics of the global batch, whose sums (and, in the
// backward, those of dy and dy * xhat) are all-reduced over the communicator. Every rank must
// convert the same model. Call it before wrapping the model in DistributedDataParallel.
#pragma once

#include "collectives/communicator.h"
#include "nn/module.h"

namespace ringlet::distributed {

// Returns the number of BatchNorm2d layers converted.
int convert_sync_batchnorm(nn::Module& module, collectives::Communicator& comm);

}  // namespace ringlet::distributed
