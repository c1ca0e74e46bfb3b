// The reduction loops compiled for the avx512 level: -mavx512f -mavx512bw -mavx512dq -mavx512vl on
// top of avx2's flags (collectives/meson.build).
#include "collectives/reduce_loops.h"

namespace ringlet::collectives {

const ReduceTable& reduce_table_avx512() {
  static const ReduceTable table = make_reduce_table();
  return table;
}

}  // namespace ringlet::collectives
