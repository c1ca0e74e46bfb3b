// The fingerprint's printed form, the one message check and the neighbour exchange. Fingerprints
// arrive from other ranks, so an out-of-range enum code is printed as its number, not trusted.
#include "collectives/fingerprint.h"

#include <cstring>

namespace ringlet::collectives {
namespace {

bool known_op_kind(OpKind op) {
  return static_cast<int>(op) <= static_cast<int>(OpKind::all_to_all);
}
bool known_reduce_op(ReduceOp op) {
  return static_cast<int>(op) <= static_cast<int>(ReduceOp::bxor);
}
bool known_dtype(DType dtype) { return static_cast<int>(dtype) <= static_cast<int>(DType::u8); }

}  // namespace

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

core::CollectiveError mismatch_error(int rank, const Fingerprint& mine, int peer,
                                     const Fingerprint* theirs) {
  return core::CollectiveError(
      core::str("fingerprint mismatch: rank ", peer, " issued ",
                theirs != nullptr ? to_string(*theirs) : std::string("something else"),
                " while rank ", rank, " issued ", to_string(mine),
                " (every rank must issue the same collectives in the same order)"));
}

std::optional<Fingerprint> read_fingerprint(const char* message, std::size_t bytes) {
  if (bytes < sizeof(Fingerprint)) return std::nullopt;
  Fingerprint f;
  std::memcpy(&f, message, sizeof f);
  return f;
}

void check_message(const char* message, std::size_t bytes, std::size_t expected_bytes,
                   bool starts_with_fingerprint, int rank, const Fingerprint& mine, int peer) {
  const std::optional<Fingerprint> theirs =
      starts_with_fingerprint ? read_fingerprint(message, bytes) : std::nullopt;
  if (bytes == expected_bytes && (!starts_with_fingerprint || theirs == mine)) return;
  throw mismatch_error(rank, mine, peer, theirs ? &*theirs : nullptr);
}

void FingerprintExchange::post(transport::Connection& left, transport::Connection& right,
                               const Fingerprint& mine, int rank, int left_rank, int right_rank,
                               std::function<void()> on_match, bool dry) {
  active_ = true;
  dry_ = dry;
  mine_ = mine;
  rank_ = rank;
  left_ = left_rank;
  right_ = right_rank;
  on_match_ = std::move(on_match);
  recv_ = left.recv(inbox_.data(), inbox_.size());
  send_ = right.send(&mine_, sizeof mine_);
}

void FingerprintExchange::settle(core::Deadline deadline, int* waiting_on) {
  if (!active_) return;
  active_ = false;
  *waiting_on = left_;
  recv_->wait(deadline);
  *waiting_on = right_;
  send_->wait(deadline);
  if (auto error = mismatch()) {
    *waiting_on = left_;  // whose fingerprint differs
    std::rethrow_exception(error);
  }
  if (on_match_) on_match_();
}

std::exception_ptr FingerprintExchange::abandon() {
  if (!active_) return nullptr;
  active_ = false;
  return mismatch();
}

std::exception_ptr FingerprintExchange::mismatch() const {
  if (dry_ || !recv_ || !recv_->done() || recv_->failed()) return nullptr;
  try {
    check_message(inbox_.data(), recv_->bytes(), sizeof(Fingerprint), true, rank_, mine_, left_);
  } catch (...) {
    return std::current_exception();
  }
  return nullptr;
}

}  // namespace ringlet::collectives
