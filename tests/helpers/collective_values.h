// The test data of the collectives matrices: small integers, so that every result is exact in
// every dtype (f16/bf16 included), and the expected reduction of `world` ranks' values.
#pragma once

#include <algorithm>
#include <cmath>
#include <vector>

#include "comm_ranks.h"

namespace ringlet::testing {

using collectives::ReduceOp;
using core::DType;

inline const std::vector<DType> kDTypes{DType::f32,  DType::f64, DType::f16,
                                        DType::bf16, DType::i32, DType::i64};
inline const std::vector<ReduceOp> kOps{ReduceOp::sum, ReduceOp::prod, ReduceOp::min, ReduceOp::max,
                                        ReduceOp::avg};
// Rank r's element i: prod stays within 2^8 (exact in every dtype), sums within 256.
inline double value(int rank, std::size_t i, ReduceOp op) {
  if (op == ReduceOp::prod) return (rank + i) % 3 == 0 ? 2.0 : 1.0;
  return static_cast<double>((rank * 3 + i * 7) % 29);
}

inline double expected(int world, std::size_t i, ReduceOp op, DType dtype) {
  double acc = value(0, i, op);
  for (int r = 1; r < world; ++r) {
    const double v = value(r, i, op);
    switch (op) {
      case ReduceOp::sum:
      case ReduceOp::avg: acc += v; break;
      case ReduceOp::prod: acc *= v; break;
      case ReduceOp::min: acc = std::min(acc, v); break;
      case ReduceOp::max: acc = std::max(acc, v); break;
      case ReduceOp::band:
        acc = static_cast<double>(static_cast<std::int64_t>(acc) & static_cast<std::int64_t>(v));
        break;
      case ReduceOp::bor:
        acc = static_cast<double>(static_cast<std::int64_t>(acc) | static_cast<std::int64_t>(v));
        break;
      case ReduceOp::bxor:
        acc = static_cast<double>(static_cast<std::int64_t>(acc) ^ static_cast<std::int64_t>(v));
        break;
    }
  }
  if (op == ReduceOp::avg) {
    if (dtype == DType::i32 || dtype == DType::i64) return std::trunc(acc / world);
    TypedBuffer round(dtype, 1);  // divide in the dtype's own precision, as the kernel does
    round.set(0, static_cast<float>(acc) / static_cast<float>(world));
    return dtype == DType::f64 ? acc / world : round.get(0);
  }
  return acc;
}

// One all_reduce of the test data on `comm`, checked element by element (the first 3 wrong ones
// named).
inline void check_all_reduce(int rank, Communicator& comm, std::size_t count, DType dtype,
                             ReduceOp op, bool in_place) {
  const int n = comm.size();
  TypedBuffer send(dtype, count), recv(dtype, count);
  for (std::size_t i = 0; i < count; ++i) send.set(i, value(rank, i, op));
  void* out = in_place ? send.data() : recv.data();
  comm.all_reduce(send.data(), out, count, dtype, op)
      ->wait(core::Deadline::after(std::chrono::seconds(60)));
  const TypedBuffer& got = in_place ? send : recv;
  int wrong = 0;
  for (std::size_t i = 0; i < count; ++i) {
    if (got.get(i) != expected(n, i, op, dtype) && ++wrong <= 3) {
      FAIL_CHECK(core::str("rank ", rank, " n=", n, " count=", count, " ", core::dtype_name(dtype),
                           " ", collectives::reduce_op_name(op),
                           in_place ? " in-place" : " out-of-place", ": element ", i, " = ",
                           got.get(i), ", expected ", expected(n, i, op, dtype)));
    }
  }
  REQUIRE(wrong == 0);
  for (std::size_t i = 0; i < count && !in_place; ++i) {  // out of place: the input is kept
    if (send.get(i) != value(rank, i, op) && ++wrong <= 3) {
      FAIL_CHECK(core::str("rank ", rank, " n=", n, " count=", count, " ", core::dtype_name(dtype),
                           " ", collectives::reduce_op_name(op), ": input element ", i,
                           " changed to ", send.get(i), " from ", value(rank, i, op)));
    }
  }
  REQUIRE(wrong == 0);
}

// The matrix of all_reduce checks on one rank: counts 0, 1, n - 1 and 1031 (awkward for every
// split), every dtype x op, out of place and in place.
inline void check_all_reduce_matrix(int rank, Communicator& comm) {
  const int n = comm.size();
  for (std::size_t count :
       {std::size_t{0}, std::size_t{1}, static_cast<std::size_t>(n - 1), std::size_t{1031}}) {
    for (DType dtype : kDTypes) {
      for (ReduceOp op : kOps) {
        for (bool in_place : {false, true}) {
          check_all_reduce(rank, comm, count, dtype, op, in_place);
        }
      }
    }
  }
}

}  // namespace ringlet::testing
