// The status board: entries as JSON, the publisher's thread, reading the board back, and the
// assessment `ringlet status` prints.
#include "collectives/status_board.h"

#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <nlohmann/json.hpp>
#include <tuple>

#include "collectives/types.h"
#include "core/env.h"
#include "core/error.h"
#include "core/host.h"
#include "core/log.h"
#include "core/thread_name.h"

namespace ringlet::collectives {
namespace {

using nlohmann::json;

json mark_json(const std::optional<StatusMark>& mark) {
  if (!mark) return nullptr;
  return {{"seq", mark->seq}, {"op", mark->op}, {"state", mark->state}, {"time_ns", mark->time_ns}};
}

std::optional<StatusMark> mark_from(const json& j) {
  if (j.is_null()) return std::nullopt;
  return StatusMark{j.at("seq").get<std::uint64_t>(), j.at("op").get<std::string>(),
                    j.at("state").get<std::string>(), j.at("time_ns").get<std::int64_t>()};
}

StatusMark mark_of(const FlightMark& m) {
  return StatusMark{m.seq, op_kind_name(m.kind), m.state, m.time_ns};
}

std::string seconds(std::int64_t ns) {
  char text[32];
  std::snprintf(text, sizeof text, "%.1f s",
                static_cast<double>(std::max<std::int64_t>(ns, 0)) / 1e9);
  return text;
}

std::string op_name(const StatusMark& m) { return core::str(m.op, " #", m.seq); }

std::string rank_list(const std::vector<int>& ranks) {
  std::string text = ranks.size() == 1 ? "rank " : "ranks ";
  for (std::size_t i = 0; i < ranks.size(); ++i) text += (i ? ", " : "") + std::to_string(ranks[i]);
  return text;
}

// How far a rank has come: the op it is in, or else the last one it finished (-1: none).
std::int64_t joined(const RankStatus& s) {
  if (s.open) return static_cast<std::int64_t>(s.open->seq);
  return s.last ? static_cast<std::int64_t>(s.last->seq) : -1;
}

bool silent(const RankStatus& s, std::int64_t now) {
  return !s.closed && now - s.time_ns > silent_after_ns(s);
}

// Where one rank is, in words.
std::string where(const RankStatus& s, std::int64_t now) {
  if (s.closed) return s.failure.empty() ? "closed its communicator" : "failed: " + s.failure;
  if (!s.recording) return "reporting, without a position (the flight recorder is off)";
  if (s.open) {
    return core::str("in ", op_name(*s.open), " (", s.open->state, ") for ",
                     seconds(now - s.open->time_ns));
  }
  if (s.last) {
    return core::str("outside collectives for ", seconds(now - s.last->time_ns), " (since ",
                     op_name(*s.last), " ", s.last->state, ")");
  }
  return "has issued no collective yet";
}

// Where a rank was when it last reported, without durations (a silent rank's).
std::string last_seen(const RankStatus& s) {
  if (s.open) return core::str("in ", op_name(*s.open), " (", s.open->state, ")");
  if (s.last) return core::str("outside collectives after ", op_name(*s.last));
  return "before its first collective";
}

// The ranks that have been inside op `seq` the longest: how long, and who.
std::pair<std::int64_t, std::vector<int>> waiting_in(
    const std::vector<std::optional<RankStatus>>& board, std::int64_t seq, std::int64_t now) {
  std::int64_t longest = 0;
  std::vector<int> who;
  for (const auto& s : board) {
    if (!s || s->closed || !s->open || static_cast<std::int64_t>(s->open->seq) != seq) continue;
    longest = std::max(longest, now - s->open->time_ns);
    who.push_back(s->rank);
  }
  return {longest, who};
}

std::string lag_story(const RankStatus& s, const StatusMark& ahead, std::int64_t waited,
                      const std::vector<int>& waiting, std::int64_t now) {
  const std::string others = core::str(rank_list(waiting), waiting.size() == 1 ? " waits" : " wait",
                                       " in it for ", seconds(waited));
  if (!s.open) {
    const std::string since = s.last ? core::str(" for ", seconds(now - s.last->time_ns),
                                                 " (since ", op_name(*s.last), " ended)")
                                     : std::string(" (it has issued no collective yet)");
    return core::str("rank ", s.rank, " has not joined ", op_name(ahead),
                     ": it is busy outside collectives", since, "; ", others,
                     " (a skew: a checkpoint or a slow step, not a hang inside ringlet)");
  }
  return core::str("rank ", s.rank, " is still in ", op_name(*s.open), " (", s.open->state,
                   ") for ", seconds(now - s.open->time_ns), " and has not joined ", op_name(ahead),
                   "; ", others);
}

}  // namespace

std::int64_t wall_now_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

std::int64_t silent_after_ns(const RankStatus& status) {
  return (2 * std::max<std::int64_t>(status.interval_ms, 1) + 250) * 1'000'000;
}

std::int64_t lag_after_ns(const RankStatus& status) {
  return (std::max<std::int64_t>(status.interval_ms, 1) + 250) * 1'000'000;
}

void RankStatus::set_position(const FlightPosition& position) {
  recording = position.enabled;
  issued = position.issued;
  open = position.open ? std::optional(mark_of(*position.open)) : std::nullopt;
  last = position.last ? std::optional(mark_of(*position.last)) : std::nullopt;
}

std::string RankStatus::to_json() const {
  return json{{"rank", rank},     {"world_size", world_size}, {"pid", pid},
              {"host", host},     {"time_ns", time_ns},       {"interval_ms", interval_ms},
              {"closed", closed}, {"failure", failure},       {"recording", recording},
              {"issued", issued}, {"open", mark_json(open)},  {"last", mark_json(last)}}
      .dump();
}

RankStatus RankStatus::from_json(const std::string& text, const std::string& where) {
  try {
    const json j = json::parse(text);
    RankStatus s;
    s.rank = j.at("rank").get<int>();
    s.world_size = j.at("world_size").get<int>();
    s.pid = j.at("pid").get<int>();
    s.host = j.at("host").get<std::string>();
    s.time_ns = j.at("time_ns").get<std::int64_t>();
    s.interval_ms = j.at("interval_ms").get<std::int64_t>();
    s.closed = j.at("closed").get<bool>();
    s.failure = j.at("failure").get<std::string>();
    s.recording = j.at("recording").get<bool>();
    s.issued = j.at("issued").get<std::uint64_t>();
    s.open = mark_from(j.at("open"));
    s.last = mark_from(j.at("last"));
    return s;
  } catch (const json::exception& e) {
    RINGLET_THROW(ValueError, where, " is not a ringlet status entry: ", e.what());
  }
}

std::string status_key(const std::string& name, int rank) {
  return core::str("status/", name, "/", rank);
}
std::string status_world_key(const std::string& name) { return "status/" + name + "/world"; }
std::string status_dump_key(const std::string& name) { return "status/" + name + "/dump"; }

std::chrono::milliseconds status_interval_from_env() {
  return std::chrono::milliseconds(core::env_int("RINGLET_STATUS_INTERVAL", 500, 0, 3'600'000));
}

StatusPublisher::StatusPublisher(std::unique_ptr<transport::Store> store, std::string name,
                                 RankStatus identity, std::chrono::milliseconds interval,
                                 std::function<void(RankStatus&)> snapshot,
                                 std::function<void()> dump)
    : store_(std::move(store)),
      name_(std::move(name)),
      identity_(std::move(identity)),
      interval_(interval),
      snapshot_(std::move(snapshot)),
      dump_(std::move(dump)) {
  identity_.pid = static_cast<int>(::getpid());
  identity_.host = core::host_name();
  identity_.interval_ms = interval_.count();
  thread_ = std::thread([this] {
    core::name_this_thread("rl-status");
    run();
  });
}

StatusPublisher::~StatusPublisher() {
  {
    std::lock_guard lock(mutex_);
    stopping_ = true;
  }
  wake_.notify_all();
  thread_.join();
}

void StatusPublisher::run() {
  try {
    register_name();
    dumps_seen_ = store_->add(status_dump_key(name_), 0);
  } catch (const std::exception& e) {
    failed(e, "the status board is not reachable");
  }
  std::unique_lock lock(mutex_);
  while (!stopping_ && !gone_) {
    lock.unlock();
    publish(false);
    answer_dump_request();
    lock.lock();
    wake_.wait_for(lock, interval_, [this] { return stopping_; });
  }
  lock.unlock();
  publish(true);
}

// Says so once; a store that is gone (any failure but a timeout) is not asked again.
void StatusPublisher::failed(const std::exception& e, const char* what) {
  if (!warned_) {
    core::log(core::LogLevel::warn, "rank ", identity_.rank, ": ", what, " (", name_,
              "): ", e.what());
  }
  warned_ = true;
  if (dynamic_cast<const core::TimeoutError*>(&e) == nullptr) gone_ = true;
}

RankStatus StatusPublisher::now(bool closed) const {
  RankStatus s = identity_;
  snapshot_(s);
  s.closed = closed;
  s.time_ns = wall_now_ns();
  return s;
}

void StatusPublisher::publish(bool closed) {
  if (gone_) return;
  const RankStatus s = now(closed);
  try {
    store_->set(status_key(name_, s.rank), s.to_json());
  } catch (const std::exception& e) {
    failed(e, "could not publish its status");
  }
}

// Rank 0 adds the communicator to the board's index and says how many ranks it has.
void StatusPublisher::register_name() {
  if (identity_.rank != 0) return;
  store_->set(status_world_key(name_), std::to_string(identity_.world_size));
  std::string names = store_->compare_set(kStatusNamesKey, "\n", "\n");  // read it
  for (int attempt = 0; attempt < 100; ++attempt) {
    if (("\n" + names).find("\n" + name_ + "\n") != std::string::npos) return;
    const std::string wanted = names + name_ + "\n";
    names = store_->compare_set(kStatusNamesKey, names, wanted);
  }
}

void StatusPublisher::answer_dump_request() {
  if (gone_) return;
  try {
    const std::int64_t asked = store_->add(status_dump_key(name_), 0);
    if (asked > dumps_seen_) {
      dumps_seen_ = asked;
      dump_();
    }
  } catch (const std::exception& e) {
    failed(e, "could not read the board's dump requests");
  }
}

std::vector<std::optional<RankStatus>> read_status_board(transport::Store& store,
                                                         const std::string& name, int world_size,
                                                         std::chrono::milliseconds per_key) {
  std::vector<std::optional<RankStatus>> board(static_cast<std::size_t>(world_size));
  for (int r = 0; r < world_size; ++r) {
    const std::string key = status_key(name, r);
    try {
      board[static_cast<std::size_t>(r)] =
          RankStatus::from_json(store.get(key, core::Deadline::after(per_key)), "store key " + key);
    } catch (const core::TimeoutError&) {
      // not published yet
    }
  }
  return board;
}

namespace {

// The newest op any live rank has joined, and who has waited in it how long.
struct Front {
  std::int64_t seq = -1;
  std::optional<StatusMark> mark;
  std::int64_t waited = 0;
  std::vector<int> waiting;
};

Front find_front(const std::vector<std::optional<RankStatus>>& board, std::int64_t now) {
  Front f;
  for (const auto& s : board) {
    if (!s || s->closed || silent(*s, now) || joined(*s) <= f.seq) continue;
    f.seq = joined(*s);
    f.mark = s->open ? s->open : s->last;
  }
  std::tie(f.waited, f.waiting) = waiting_in(board, f.seq, now);
  return f;
}

std::string rank_line(const RankStatus& s, std::int64_t now) {
  return core::str(
      "rank ", s.rank, " (pid ", s.pid, " on ", s.host, "): ",
      silent(s, now) ? core::str("silent for ", seconds(now - s.time_ns), "; ") : std::string(),
      where(s, now), s.open && s.last ? "; last finished " + op_name(*s.last) : std::string());
}

// What the story says of the board as a whole when no rank lags.
std::string board_as_a_whole(const std::vector<std::optional<RankStatus>>& board, const Front& f,
                             std::int64_t stuck_ns) {
  if (f.mark && f.mark->state != "completed" && f.waiting.size() > 1 && f.waited > stuck_ns) {
    return core::str(rank_list(f.waiting), " are all in ", op_name(*f.mark), " for ",
                     seconds(f.waited), ": no rank is missing from it, a transfer stalled");
  }
  if (std::all_of(board.begin(), board.end(), [](const auto& s) { return s && s->closed; })) {
    return "ended: every rank has closed its communicator";
  }
  return f.mark ? core::str("healthy: every rank reporting, the newest op ", op_name(*f.mark))
                : std::string("healthy: every rank reporting, no op issued yet");
}

}  // namespace

// The story's order: silent ranks, ranks busy outside collectives while the others wait (a
// skew), ranks held up inside an older op (waiting, in turn, on one behind them), ranks with no
// entry; then what the board says as a whole.
StatusAssessment assess_status(const std::vector<std::optional<RankStatus>>& board,
                               std::int64_t now, std::chrono::milliseconds stuck_after) {
  enum Kind { kSilent, kOutside, kBehind, kMissing, kKinds };
  std::vector<std::string> told[kKinds];
  std::vector<int> who[kKinds];
  StatusAssessment a;
  const std::int64_t stuck_ns = static_cast<std::int64_t>(stuck_after.count()) * 1'000'000;
  const Front f = find_front(board, now);
  for (std::size_t r = 0; r < board.size(); ++r) {
    const auto& s = board[r];
    if (!s) {
      told[kMissing].push_back(core::str("rank ", r,
                                         " has published no status (not started yet, "
                                         "or RINGLET_STATUS_INTERVAL=0 there)"));
      a.ranks.push_back(core::str("rank ", r, ": no status"));
      continue;
    }
    a.ranks.push_back(rank_line(*s, now));
    if (silent(*s, now)) {
      who[kSilent].push_back(s->rank);
      told[kSilent].push_back(core::str("rank ", r, " (pid ", s->pid, ") has not reported for ",
                                        seconds(now - s->time_ns),
                                        ": stopped, or hung outside "
                                        "ringlet's threads; last seen ",
                                        last_seen(*s)));
      a.stuck = a.stuck || now - s->time_ns > stuck_ns;
    } else if (!s->closed && f.mark && joined(*s) < f.seq && f.waited > lag_after_ns(*s)) {
      const Kind kind = s->open ? kBehind : kOutside;
      who[kind].push_back(s->rank);
      told[kind].push_back(lag_story(*s, *f.mark, f.waited, f.waiting, now));
    }
    if (s->open && !s->closed) a.stuck = a.stuck || now - s->open->time_ns > stuck_ns;
  }
  for (int k = 0; k < kKinds; ++k) {
    a.story.insert(a.story.end(), told[k].begin(), told[k].end());
    a.lagging.insert(a.lagging.end(), who[k].begin(), who[k].end());
  }
  if (a.lagging.empty() && told[kMissing].empty()) {
    a.story.push_back(board_as_a_whole(board, f, stuck_ns));
  }
  return a;
}

}  // namespace ringlet::collectives
