// A build without libibverbs (-Drdma=disabled, or libibverbs-dev missing): only the emulated
// provider exists.
#include "transport/rdma/verbs.h"

namespace ringlet::transport::rdma {

Provider* ibverbs_provider() { return nullptr; }

}  // namespace ringlet::transport::rdma
