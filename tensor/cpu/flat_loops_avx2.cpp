// The flat loops compiled for the avx2 level: -mavx2 -mfma -mf16c (tensor/meson.build).
#include "tensor/cpu/flat_loops_impl.h"

namespace ringlet::tensor::cpu {

const FlatLoops& flat_loops_avx2() {
  static const FlatLoops table = make_flat_loops();
  return table;
}

}  // namespace ringlet::tensor::cpu
