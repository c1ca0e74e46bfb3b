// Vocabulary of the collectives layer: reduce ops and op kinds (the fingerprint built from them
// is collectives/fingerprint.h).
#pragma once

#include <cstdint>
#include <string>

#include "core/dtype.h"

namespace ringlet::collectives {

using core::DType;

// band, bor and bxor are for integer dtypes (u8, i32, i64).
enum class ReduceOp : std::uint8_t { sum, prod, min, max, avg, band, bor, bxor };

enum class OpKind : std::uint8_t {
  all_reduce,
  reduce_scatter,
  all_gather,
  broadcast,
  reduce,
  barrier,
  send,
  recv,
  gather,
  scatter,
  all_to_all
};

const char* reduce_op_name(ReduceOp op);
const char* op_kind_name(OpKind op);
ReduceOp parse_reduce_op(const std::string& name);  // "sum" ...; ValueError naming the choices

}  // namespace ringlet::collectives
