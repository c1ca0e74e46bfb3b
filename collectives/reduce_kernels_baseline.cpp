// The reduction loops compiled for the baseline level: plain x86-64 (SSE2), or the target's own
// baseline.
#include "collectives/reduce_loops.h"

namespace ringlet::collectives {

const ReduceTable& reduce_table_baseline() {
  static const ReduceTable table = make_reduce_table();
  return table;
}

}  // namespace ringlet::collectives
