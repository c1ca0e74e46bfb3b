// Vocabulary of the collectives layer: reduce ops, op kinds and the fingerprint every
// collective carries so that ranks that disagree on what they are doing fail loudly.
#pragma once

#include <cstdint>
#include <string>

#include "core/dtype.h"

namespace ringlet::collectives {

using core::DType;

enum class ReduceOp : std::uint8_t { sum, prod, min, max, avg };

enum class OpKind : std::uint8_t {
  all_reduce,
  reduce_scatter,
  all_gather,
  broadcast,
  reduce,
  barrier,
  send,
  recv
};

const char* reduce_op_name(ReduceOp op);
const char* op_kind_name(OpKind op);
ReduceOp parse_reduce_op(const std::string& name);  // "sum" ...; ValueError naming the choices

// What a rank believes the current collective is. Sent with the first message of each
// collective; all ranks must agree (seq is the collective's number on this communicator).
struct Fingerprint {
  OpKind op = OpKind::all_reduce;
  DType dtype = DType::f32;
  ReduceOp redop = ReduceOp::sum;
  std::uint8_t reserved = 0;
  std::int32_t root = -1;
  std::uint64_t count = 0;
  std::uint64_t seq = 0;
  bool operator==(const Fingerprint&) const = default;
};
static_assert(sizeof(Fingerprint) == 24);

std::string to_string(const Fingerprint& f);  // "all_reduce(count=10, f32, sum, seq=3)"

}  // namespace ringlet::collectives
