// Agreeing on when a run stops early (stop_request.h). One rank may see the signal a step
// before another, so each rank's request is all-reduced (max) once per step: the vote issued
// after step k is read after step k+1, so nobody waits on it, and every rank reads the same
// vote at the same step, so all stop after the same one. Without a communicator the request is
// read directly.
#pragma once

#include <cstdint>

#include "collectives/communicator.h"
#include "trainer/stop_request.h"

namespace ringlet::trainer {

class StopVote {
 public:
  StopVote(collectives::Communicator* comm, const StopRequest& request);
  ~StopVote();  // settles a vote still in flight
  StopVote(const StopVote&) = delete;
  StopVote& operator=(const StopVote&) = delete;

  // After each training step: whether every rank stops now, after this step.
  bool after_step();
  // At an epoch's end (every rank at once): the vote in flight, then one on the requests as
  // they stand. Whether every rank stops after this epoch.
  bool settle();
  // The signal the ranks agreed on (the highest number among the requests), or 0.
  int signal() const { return agreed_; }

 private:
  bool read_pending();
  void issue();

  collectives::Communicator* comm_;
  const StopRequest& request_;
  std::int32_t vote_ = 0;  // the buffer of the vote in flight
  collectives::WorkPtr pending_;
  int agreed_ = 0;
};

}  // namespace ringlet::trainer
