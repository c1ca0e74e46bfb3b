// Names of reduce ops and op kinds, and parsing of reduce-op names.
#include "collectives/types.h"

#include <algorithm>
#include <array>
#include <cctype>

#include "core/error.h"

namespace ringlet::collectives {

namespace {

constexpr std::array<ReduceOp, 8> kReduceOps = {ReduceOp::sum, ReduceOp::prod, ReduceOp::min,
                                                ReduceOp::max, ReduceOp::avg,  ReduceOp::band,
                                                ReduceOp::bor, ReduceOp::bxor};

}  // namespace

const char* reduce_op_name(ReduceOp op) {
  switch (op) {
    case ReduceOp::sum: return "sum";
    case ReduceOp::prod: return "prod";
    case ReduceOp::min: return "min";
    case ReduceOp::max: return "max";
    case ReduceOp::avg: return "avg";
    case ReduceOp::band: return "band";
    case ReduceOp::bor: return "bor";
    case ReduceOp::bxor: return "bxor";
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
    case OpKind::gather: return "gather";
    case OpKind::scatter: return "scatter";
    case OpKind::all_to_all: return "all_to_all";
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
  RINGLET_THROW(ValueError, "unknown reduce op '", name,
                "' (choices: sum, prod, min, max, avg, band, bor, bxor)");
}

}  // namespace ringlet::collectives
