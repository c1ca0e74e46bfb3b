// Request: the completion handle of one asynchronous send or receive. The transport completes
// or fails it from its progress thread; the caller waits with a deadline. A request that is
// done stays done; a failed one rethrows its error from every wait().
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstddef>
#include <exception>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "core/deadline.h"

namespace ringlet::transport {

// What a request is, kept as fields and spelled out only when a message names it: formatting a
// string for every request (and every Work) made a 2-rank 4 KiB all-reduce over shm take 2.1 us
// instead of 1.0.
struct RequestLabel {
  enum class Kind { send, recv };
  Kind kind;
  int local_rank;
  int peer_rank;
  std::size_t bytes;      // of the send; the room of the receive
  const char* transport;  // "tcp", "shm", "rdma"

  // E.g. "rank 0 recv of up to 16 bytes from rank 1 (tcp)".
  std::string text() const;
};

class Request {
 public:
  // `label` names the operation in timeout messages.
  explicit Request(const RequestLabel& label) : label_(label) {}

  // Blocks until the request completes or fails (rethrows its error), or the deadline passes
  // (throws core::TimeoutError naming the operation and the bytes moved so far).
  void wait(core::Deadline deadline);
  bool done() const;
  bool failed() const;
  std::size_t bytes() const;  // payload bytes moved so far (the message size once done)

  // Runs fn once the request is done (completed or failed), on the thread that finished it,
  // or right away on this thread if it already is. fn must not block.
  void then(std::function<void()> fn);

  // --- for transports that let the waiting thread move the data itself ---
  // `driver(&deadline)` is called by wait() before it blocks: it may complete the request on
  // the waiting thread (within the deadline), or hand it to the transport's own thread.
  // `driver(nullptr)` is called by then(): nobody will wait, so the transport must progress
  // the request on its own. Set once, before the request is handed out.
  using Driver = std::function<void(const core::Deadline*)>;
  void set_driver(Driver driver) { driver_ = std::move(driver); }

  // --- for transports ---
  void add_bytes(std::size_t n);
  void complete();
  void fail(std::exception_ptr error);

 private:
  mutable std::mutex mutex_;
  std::condition_variable cv_;
  RequestLabel label_;
  // Set once, under mutex_, after error_: a reader that sees it set (acquire) sees error_ too,
  // which nothing writes after, so a wait on a finished request takes no lock.
  std::atomic<bool> done_{false};
  std::exception_ptr error_;
  std::size_t bytes_ = 0;
  std::vector<std::function<void()>> continuations_;
  Driver driver_;
};

using RequestPtr = std::shared_ptr<Request>;

// Waits for every request (in order) with one deadline.
void wait_all(const std::vector<RequestPtr>& requests, core::Deadline deadline);

}  // namespace ringlet::transport
