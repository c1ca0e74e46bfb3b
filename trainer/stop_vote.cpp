// The ranks' vote on stopping; see stop_vote.h.
#include "trainer/stop_vote.h"

namespace ringlet::trainer {

StopVote::StopVote(collectives::Communicator* comm, const StopRequest& request)
    : comm_(comm != nullptr && comm->size() > 1 ? comm : nullptr), request_(request) {}

StopVote::~StopVote() {
  try {
    read_pending();
  } catch (...) {  // a failed collective has been reported by the step that saw it
  }
}

bool StopVote::read_pending() {
  if (!pending_) return agreed_ != 0;
  pending_->wait(core::Deadline::after(comm_->timeout()));
  pending_.reset();
  if (vote_ > 0) agreed_ = vote_;
  return agreed_ != 0;
}

void StopVote::issue() {
  vote_ = request_.signal();
  pending_ = comm_->all_reduce(&vote_, &vote_, 1, core::DType::i32, collectives::ReduceOp::max);
}

bool StopVote::after_step() {
  if (comm_ == nullptr) {
    agreed_ = request_.signal();
    return agreed_ != 0;
  }
  if (read_pending()) return true;
  issue();
  return false;
}

bool StopVote::settle() {
  if (comm_ == nullptr) return after_step();
  if (read_pending()) return true;
  issue();
  return read_pending();
}

}  // namespace ringlet::trainer
