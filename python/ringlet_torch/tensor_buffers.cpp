// Tensors as ringlet buffers: see tensor_buffers.h.
#include "tensor_buffers.h"

#include <cstring>

#include "core/error.h"

namespace ringlet::torch_backend {
namespace {

using collectives::DType;
using collectives::ReduceOp;

const char* op_name(const c10d::ReduceOp& op) {
  switch (op.op_) {
    case c10d::ReduceOp::SUM: return "SUM";
    case c10d::ReduceOp::AVG: return "AVG";
    case c10d::ReduceOp::PRODUCT: return "PRODUCT";
    case c10d::ReduceOp::MIN: return "MIN";
    case c10d::ReduceOp::MAX: return "MAX";
    case c10d::ReduceOp::BAND: return "BAND";
    case c10d::ReduceOp::BOR: return "BOR";
    case c10d::ReduceOp::BXOR: return "BXOR";
    default: return "PREMUL_SUM";
  }
}

ReduceOp ringlet_op(const c10d::ReduceOp& op, at::ScalarType type, const char* name) {
  const bool integral = at::isIntegralType(type, /*includeBool=*/true);
  if (type == at::kBool) {
    switch (op.op_) {
      case c10d::ReduceOp::SUM:
      case c10d::ReduceOp::MAX:
      case c10d::ReduceOp::BOR: return ReduceOp::max;
      case c10d::ReduceOp::PRODUCT:
      case c10d::ReduceOp::MIN:
      case c10d::ReduceOp::BAND: return ReduceOp::min;
      default: break;
    }
  } else {
    switch (op.op_) {
      case c10d::ReduceOp::SUM: return ReduceOp::sum;
      case c10d::ReduceOp::PRODUCT: return ReduceOp::prod;
      case c10d::ReduceOp::MIN: return ReduceOp::min;
      case c10d::ReduceOp::MAX: return ReduceOp::max;
      case c10d::ReduceOp::AVG:
        if (!integral) return ReduceOp::avg;
        break;
      case c10d::ReduceOp::BAND: return ReduceOp::band;
      case c10d::ReduceOp::BOR: return ReduceOp::bor;
      case c10d::ReduceOp::BXOR: return ReduceOp::bxor;
      default: break;
    }
  }
  RINGLET_THROW(ValueError, "ringlet: ", name, ": ReduceOp.", op_name(op), " is not supported for ",
                c10::toString(type), " tensors");
}

}  // namespace

at::Tensor& single(std::vector<at::Tensor>& tensors, const char* op) {
  RINGLET_CHECK(tensors.size() == 1, ValueError, "ringlet: ", op,
                " takes one tensor per process, got ", tensors.size());
  return tensors[0];
}

at::Tensor host_dense(const at::Tensor& tensor, const char* op) {
  RINGLET_CHECK(tensor.device().is_cpu(), ValueError, "ringlet: ", op, ": a tensor on ",
                tensor.device().str(), "; this build of ringlet_torch moves CPU tensors only");
  RINGLET_CHECK(!tensor.is_sparse(), ValueError, "ringlet: ", op,
                ": sparse tensors are not supported");
  return tensor.contiguous();
}

std::size_t nbytes(const at::Tensor& tensor) {
  return static_cast<std::size_t>(tensor.numel()) * tensor.element_size();
}

Reducible reducible(const at::Tensor& dense, const c10d::ReduceOp& op, const char* name) {
  const at::ScalarType type = dense.scalar_type();
  const ReduceOp rop = ringlet_op(op, type, name);
  switch (type) {
    case at::kFloat: return {dense, DType::f32, rop};
    case at::kDouble: return {dense, DType::f64, rop};
    case at::kHalf: return {dense, DType::f16, rop};
    case at::kBFloat16: return {dense, DType::bf16, rop};
    case at::kInt: return {dense, DType::i32, rop};
    case at::kLong: return {dense, DType::i64, rop};
    case at::kByte: return {dense, DType::u8, rop};
    case at::kBool:
      return {dense, DType::u8, rop};  // 0 or 1 in a byte
    // Wrapping sums and products of the low bits are the same in a wider type.
    case at::kChar:
    case at::kShort: return {dense.to(at::kInt), DType::i32, rop};
    default: break;
  }
  RINGLET_THROW(DTypeError, "ringlet: ", name, ": ", c10::toString(type),
                " tensors cannot be reduced (float, double, half, bfloat16, int8, int16, int32, "
                "int64, uint8 and bool can)");
}

std::function<void()> write_back(at::Tensor user, at::Tensor buffer) {
  return [user, buffer]() mutable {
    if (!buffer.is_same(user)) user.copy_(buffer);
  };
}

at::Tensor concat_bytes(const std::vector<at::Tensor>& tensors, const at::Tensor& like,
                        const char* op, StagingPool& pool) {
  std::size_t total = 0;
  for (const auto& t : tensors) {
    RINGLET_CHECK(t.scalar_type() == like.scalar_type(), DTypeError, "ringlet: ", op, ": a ",
                  c10::toString(t.scalar_type()), " tensor in a list of ",
                  c10::toString(like.scalar_type()), " ones");
    total += nbytes(t);
  }
  at::Tensor bytes = pool.empty({static_cast<std::int64_t>(total)}, at::kByte);
  auto* out = static_cast<char*>(bytes.data_ptr());
  for (const auto& t : tensors) {
    const at::Tensor dense = host_dense(t, op);
    std::memcpy(out, dense.data_ptr(), nbytes(dense));
    out += nbytes(dense);
  }
  return bytes;
}

void split_bytes(const at::Tensor& bytes, std::vector<at::Tensor>& tensors) {
  const auto* in = static_cast<const char*>(bytes.data_ptr());
  for (auto& t : tensors) {
    if (t.is_contiguous()) {
      std::memcpy(t.data_ptr(), in, nbytes(t));
    } else {
      at::Tensor dense = at::empty_like(t, at::MemoryFormat::Contiguous);
      std::memcpy(dense.data_ptr(), in, nbytes(t));
      t.copy_(dense);
    }
    in += nbytes(t);
  }
}

}  // namespace ringlet::torch_backend
