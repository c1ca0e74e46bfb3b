// The flat loops compiled for the avx512 level: -mavx512f -mavx512bw -mavx512dq -mavx512vl on top
// of avx2's flags (tensor/meson.build).
#include "tensor/cpu/flat_loops_impl.h"

namespace ringlet::tensor::cpu {

const FlatLoops& flat_loops_avx512() {
  static const FlatLoops table = make_flat_loops();
  return table;
}

}  // namespace ringlet::tensor::cpu
