// FailurePolicy: first failure wins, published in the store, connections aborted.
#include "collectives/failure_policy.h"

#include "core/log.h"

namespace ringlet::collectives {
namespace {

// How long a rank that only saw a connection fail waits for another rank's published cause:
// long enough for a loaded machine to schedule the rank that found it, short next to any
// deadline (a crashed peer never publishes, so this is the delay its error costs).
constexpr std::chrono::milliseconds kRootCauseGrace{2000};

}  // namespace

FailurePolicy::FailurePolicy(transport::Store& store, std::string error_key, int rank,
                             std::function<void(const std::string&)> abort_connections)
    : store_(store),
      error_key_(std::move(error_key)),
      rank_(rank),
      abort_connections_(std::move(abort_connections)) {}

std::exception_ptr FailurePolicy::current() const {
  std::lock_guard lock(mutex_);
  return failure_;
}

std::exception_ptr FailurePolicy::fail(const std::string& message,
                                       const std::string& abort_reason) {
  bool first = false;
  {
    std::lock_guard lock(mutex_);
    if (!failure_) {
      failure_ = std::make_exception_ptr(core::CollectiveError(message));
      first = true;
    }
  }
  if (first) abort_connections_(abort_reason);
  return current();
}

FailurePolicy::OpFailure FailurePolicy::describe(const OpState& op, std::exception_ptr error) {
  std::string cause;
  bool timed_out = false, peer_failed = false;
  try {
    std::rethrow_exception(error);
  } catch (const core::TimeoutError& e) {
    timed_out = true;
    cause = e.what();
  } catch (const core::PeerError& e) {
    peer_failed = true;
    cause = e.what();
  } catch (const std::exception& e) {
    cause = e.what();
  }
  const std::string deadline = timed_out ? core::str(" (its deadline of ", op.timeout.count(),
                                                     " ms passed; ", timeout_source_, ")")
                                         : std::string();
  const std::string local =
      core::str("rank ", rank_, ": ", op.name(), " seq ", op.seq, " failed",
                op.waiting_on >= 0 ? core::str(" waiting for rank ", op.waiting_on) : std::string(),
                " after ", op.bytes_done, " bytes", deadline, ": ", cause);
  const std::string root = publish_root_cause(local, peer_failed);
  std::string message = root == local ? local : core::str(local, "\n  root cause: ", root);
  if (timed_out) message += board_story();
  return {message, core::str("rank ", rank_, " aborted: ", local)};
}

// The status board's story, as lines to add to a timed-out op's message (none without a board).
std::string FailurePolicy::board_story() const {
  if (!read_board_) return "";
  try {
    std::string text;
    for (const std::string& line : read_board_()) text += "\n  status board: " + line;
    return text;
  } catch (const std::exception& e) {
    return core::str("\n  status board: could not be read: ", e.what());
  }
}

// Publishes `local` as the root cause unless another rank's is there; returns the root cause.
std::string FailurePolicy::publish_root_cause(const std::string& local, bool peer_failed) {
  std::string root = local;
  try {
    if (peer_failed) {
      // A connection that failed may be the echo of a cause another rank is publishing right
      // now (a neighbour's transport closes on a protocol violation before that neighbour has
      // checked the fingerprint): give it a moment to appear.
      try {
        root = store_.get(error_key_, core::Deadline::after(kRootCauseGrace));
      } catch (const core::TimeoutError&) {
      }
    }
    if (root == local) root = store_.compare_set(error_key_, "", local);
  } catch (const std::exception& e) {
    core::log(core::LogLevel::warn, "rank ", rank_, ": could not publish the error: ", e.what());
  }
  return root;
}

}  // namespace ringlet::collectives
