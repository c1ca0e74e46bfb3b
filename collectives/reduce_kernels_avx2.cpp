// The reduction loops compiled for the avx2 level: -mavx2 -mfma -mf16c (collectives/meson.build).
#include "collectives/reduce_loops.h"

namespace ringlet::collectives {

const ReduceTable& reduce_table_avx2() {
  static const ReduceTable table = make_reduce_table();
  return table;
}

}  // namespace ringlet::collectives
