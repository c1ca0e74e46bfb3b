// Names of reduce ops and op kinds, parsing of reduce-op names, and the printed form of a
// Fingerprint. Fingerprints arrive from other ranks, so an out-of-range enum code is printed
// as its number rather than trusted.
#include "collectives/types.h"

#include <algorithm>
#include <array>
#include <cctype>

#include "core/error.h"

namespace ringlet::collectives {

namespace {

constexpr std::array<ReduceOp, 5> kReduceOps = {ReduceOp::sum, ReduceOp::prod, ReduceOp::min,
                                                ReduceOp::max, ReduceOp::avg};

bool known_op_kind(OpKind op) { return static_cast<int>(op) <= static_cast<int>(OpKind::recv); }
bool known_reduce_op(ReduceOp op) {
  return static_cast<int>(op) <= static_cast<int>(ReduceOp::avg);
}
bool known_dtype(DType dtype) { return static_cast<int>(dtype) <= static_cast<int>(DType::u8); }

}  // namespace

const char* reduce_op_name(ReduceOp op) {
  switch (op) {
    case ReduceOp::sum: return "sum";
    case ReduceOp::prod: return "prod";
    case ReduceOp::min: return "min";
    case ReduceOp::max: return "max";
    case ReduceOp::avg: return "avg";
  }
  return "unknown";
}

const char* op_kind_name(OpKind op) {
  switch (op) {
    case OpKind::all_reduce: return "all_reduce";
    case OpKind::reduce_scatter: return "reduce_scatter";
    case OpKind::all_gather: return "all_gather";
    case OpKind::broadcast: return "broadcast";
    case OpKind::reduce: return "reduce";
    case OpKind::barrier: return "barrier";
    case OpKind::send: return "send";
    case OpKind::recv: return "recv";
  }
  return "unknown";
}

ReduceOp parse_reduce_op(const std::string& name) {
  // Case-insensitive, so "SUM" from a command line or an environment variable works too.
  std::string lower = name;
  std::transform(lower.begin(), lower.end(), lower.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  for (ReduceOp op : kReduceOps) {
    if (lower == reduce_op_name(op)) return op;
  }
  RINGLET_THROW(ValueError, "unknown reduce op '", name, "' (choices: sum, prod, min, max, avg)");
}

std::string to_string(const Fingerprint& f) {
  // Every field that operator== compares is printed whenever it can differ from its default,
  // so two fingerprints that compare unequal never print the same.
  std::string out;
  if (known_op_kind(f.op)) {
    out = op_kind_name(f.op);
  } else {
    out = core::str("op#", static_cast<int>(f.op));
  }
  out += core::str("(count=", f.count, ", ");
  if (known_dtype(f.dtype)) {
    out += core::str(f.dtype);
  } else {
    out += core::str("dtype#", static_cast<int>(f.dtype));
  }
  if (known_reduce_op(f.redop)) {
    out += core::str(", ", reduce_op_name(f.redop));
  } else {
    out += core::str(", redop#", static_cast<int>(f.redop));
  }
  if (f.root != -1) out += core::str(", root=", f.root);
  if (f.reserved != 0) out += core::str(", reserved=", static_cast<int>(f.reserved));
  out += core::str(", seq=", f.seq, ")");
  return out;
}

}  // namespace ringlet::collectives
