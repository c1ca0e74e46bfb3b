// convert_sync_batchnorm: a stats reducer (a blocking f64 all-reduce with the communicator's
// deadline) installed in every BatchNorm2d, found by walking the module tree.
#include "distributed/sync_batch_norm.h"

#include "nn/batch_norm.h"

namespace ringlet::distributed {

int convert_sync_batchnorm(nn::Module& module, collectives::Communicator& comm) {
  int converted = 0;
  if (auto* bn = dynamic_cast<nn::BatchNorm2d*>(&module)) {
    bn->set_stats_reducer([&comm](std::vector<double>& values) {
      comm.all_reduce(values.data(), values.data(), values.size(), core::DType::f64,
                      collectives::ReduceOp::sum)
          ->wait(core::Deadline::after(comm.timeout()));
    });
    ++converted;
  }
  for (const auto& [name, child] : module.children()) {
    converted += convert_sync_batchnorm(*child, comm);
  }
  return converted;
}

}  // namespace ringlet::distributed
