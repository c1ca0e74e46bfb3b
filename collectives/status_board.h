// The status board: where every rank of a running job stands, kept in the job's own store (no
// new port), for `ringlet status` and for a timed-out rank's error message. Each rank's
// StatusPublisher writes its position (flight_recorder.h's FlightPosition: the op it is in and
// since when, or how long it has been outside collectives, and the last op it finished) under
// "status/<communicator>/<rank>" every RINGLET_STATUS_INTERVAL ms (default 500; 0: off), from a
// thread and a store connection of its own. A rank that stops publishing (SIGSTOP, a hang
// outside ringlet's threads) goes stale; a rank busy outside collectives while the others wait
// for it (a checkpoint, a slow step) is told apart from one stuck inside a collective.
// assess_status() reads the board: lagging ranks first, then one line per rank.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "collectives/flight_recorder.h"
#include "transport/store.h"

namespace ringlet::collectives {

// An op on the board: its sequence number, name, state and time (issued for an open op, ended
// for a finished one; wall-clock ns).
struct StatusMark {
  std::uint64_t seq = 0;
  std::string op;
  std::string state;
  std::int64_t time_ns = 0;
};

// One rank's entry on the board, as published.
struct RankStatus {
  int rank = 0;
  int world_size = 0;
  int pid = 0;
  std::string host;
  std::int64_t time_ns = 0;  // when it was published (wall clock)
  std::int64_t interval_ms = 0;
  bool closed = false;     // the communicator was destroyed (a clean end, or after a failure)
  std::string failure;     // the communicator's failure, if any
  bool recording = false;  // the flight recorder is on (off: no position to show)
  std::uint64_t issued = 0;
  std::optional<StatusMark> open;  // the oldest op issued and not finished
  std::optional<StatusMark> last;  // the newest finished

  void set_position(const FlightPosition& position);

  std::string to_json() const;
  // Throws core::ValueError naming `where` when the text is not a status entry.
  static RankStatus from_json(const std::string& text, const std::string& where);
};

// The store keys of communicator `name`'s board.
std::string status_key(const std::string& name, int rank);
std::string status_world_key(const std::string& name);
std::string status_dump_key(const std::string& name);  // a counter: add 1 to ask for dumps
const char* const kStatusNamesKey = "status/names";    // the communicators, one name a line

// RINGLET_STATUS_INTERVAL in ms (default 500; 0: no board).
std::chrono::milliseconds status_interval_from_env();

// Publishes one rank's status every `interval` until destroyed (then once more, closed). The
// store is the publisher's own client; `snapshot` fills in the position and failure; `dump` is
// called when someone asks for flight recorder dumps (status_dump_key's counter rises).
class StatusPublisher {
 public:
  StatusPublisher(std::unique_ptr<transport::Store> store, std::string name, RankStatus identity,
                  std::chrono::milliseconds interval, std::function<void(RankStatus&)> snapshot,
                  std::function<void()> dump);
  ~StatusPublisher();
  StatusPublisher(const StatusPublisher&) = delete;
  StatusPublisher& operator=(const StatusPublisher&) = delete;

  // This rank's status as of now (its published entry may be an interval old, or older where
  // the publisher's thread waits for a core).
  RankStatus now(bool closed = false) const;

 private:
  void run();
  void publish(bool closed);
  void register_name();
  void answer_dump_request();
  void failed(const std::exception& e, const char* what);

  std::unique_ptr<transport::Store> store_;
  std::string name_;
  RankStatus identity_;
  std::chrono::milliseconds interval_;
  std::function<void(RankStatus&)> snapshot_;
  std::function<void()> dump_;
  std::int64_t dumps_seen_ = 0;
  bool warned_ = false;
  // The store's server closed the connection or refused it (stopped or died): not asked again,
  // for a reconnect would wait out the store's timeout, and the communicator's teardown with it.
  bool gone_ = false;
  std::mutex mutex_;
  std::condition_variable wake_;
  bool stopping_ = false;
  std::thread thread_;
};

// The board of communicator `name` as read from `store`: one entry per rank (empty: none
// published yet). Each read waits at most `per_key`.
std::vector<std::optional<RankStatus>> read_status_board(transport::Store& store,
                                                         const std::string& name, int world_size,
                                                         std::chrono::milliseconds per_key);

// What the board says at `now_ns`: the story first (who lags, and whether it is stopped, stuck
// inside a collective or busy outside one), then a line per rank; `stuck` when a rank has been
// silent or inside one op longer than `stuck_after`.
struct StatusAssessment {
  std::vector<std::string> story;
  std::vector<std::string> ranks;
  std::vector<int> lagging;
  bool stuck = false;
};
StatusAssessment assess_status(const std::vector<std::optional<RankStatus>>& board,
                               std::int64_t now_ns, std::chrono::milliseconds stuck_after);

// How long after its last publication a rank counts as silent (stopped or hung): two intervals
// and 250 ms.
std::int64_t silent_after_ns(const RankStatus& status);
// How long the others must have waited in an op a rank has not joined before it counts as
// lagging: one interval (its entry may be that old) and 250 ms.
std::int64_t lag_after_ns(const RankStatus& status);

std::int64_t wall_now_ns();

}  // namespace ringlet::collectives
