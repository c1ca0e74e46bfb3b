// The flat loops' table of a level, and of the level in use (tensor/cpu/flat_loops.h).
#include "tensor/cpu/flat_loops.h"

#include <array>

namespace ringlet::tensor::cpu {

const FlatLoops& flat_loops(core::Isa isa) {
  // Which levels run here is asked once: the ops look the table up on every call.
  static const std::array<const FlatLoops*, 3> tables = [] {
    std::array<const FlatLoops*, 3> usable{&flat_loops_baseline(), nullptr, nullptr};
#if defined(__x86_64__)
    if (core::isa_supported(core::Isa::avx2)) usable[1] = &flat_loops_avx2();
    if (core::isa_supported(core::Isa::avx512)) usable[2] = &flat_loops_avx512();
#endif
    return usable;
  }();
  return core::table_for_isa(tables, isa, "tensor loops");
}

const FlatLoops& flat_loops() {
  static const FlatLoops& active = flat_loops(core::active_isa());
  return active;
}

}  // namespace ringlet::tensor::cpu
