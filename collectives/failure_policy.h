// What a communicator does when something fails: the first failure becomes the communicator's
// (every later op fails fast with it), every connection is aborted so the peers stop waiting at
// once, and the first cause is published in the store (compare_set, first writer wins) so that
// ranks that only saw a neighbour hang up can name the root cause.
#pragma once

#include <exception>
#include <functional>
#include <mutex>
#include <string>
#include <vector>

#include "collectives/context.h"
#include "transport/store.h"

namespace ringlet::collectives {

class FailurePolicy {
 public:
  // `abort_connections` aborts every connection of the communicator with the reason given.
  // The store must outlive the policy.
  FailurePolicy(transport::Store& store, std::string error_key, int rank,
                std::function<void(const std::string&)> abort_connections);

  // The communicator's failure; null while none happened.
  std::exception_ptr current() const;
  // Records `message` as the communicator's failure unless one is recorded already (then
  // connections are aborted with `abort_reason`); returns the communicator's failure.
  std::exception_ptr fail(const std::string& message, const std::string& abort_reason);
  // An algorithm's exception during `op`, told: the rank, op, seq, peer waited on and bytes
  // done, the published root cause and, for a timeout, the status board's story (read while
  // this rank's flight recorder still has the op open). fail(message, abort_reason) then makes
  // it the communicator's failure.
  struct OpFailure {
    std::string message, abort_reason;
  };
  OpFailure describe(const OpState& op, std::exception_ptr error);
  // What a timed-out op's message says sets the deadline (RINGLET_TIMEOUT's by default).
  void set_timeout_source(std::string source) { timeout_source_ = std::move(source); }
  // What a timed-out op's message adds: the status board's story (status_board.h), read when
  // the deadline passes, which tells a rank stopped or stuck inside a collective from one busy
  // outside collectives (a skew).
  void set_board_reader(std::function<std::vector<std::string>()> read) {
    read_board_ = std::move(read);
  }
  // That story as lines ("\n  status board: ...") to add to a timed-out op's message; empty
  // without a board.
  std::string board_story() const;

 private:
  std::string publish_root_cause(const std::string& local, bool peer_failed);

  transport::Store& store_;
  std::string error_key_;
  int rank_;
  std::function<void(const std::string&)> abort_connections_;
  mutable std::mutex mutex_;
  std::exception_ptr failure_;
  std::function<std::vector<std::string>()> read_board_;
  std::string timeout_source_ = "RINGLET_TIMEOUT sets it, in milliseconds";
};

}  // namespace ringlet::collectives
