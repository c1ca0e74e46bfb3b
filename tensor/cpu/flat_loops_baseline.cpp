// The flat loops compiled for the baseline level: plain x86-64 (SSE2), or the target's own
// baseline.
#include "tensor/cpu/flat_loops_impl.h"

namespace ringlet::tensor::cpu {

const FlatLoops& flat_loops_baseline() {
  static const FlatLoops table = make_flat_loops();
  return table;
}

}  // namespace ringlet::tensor::cpu
