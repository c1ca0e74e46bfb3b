// The ring buffer, its JSON, and the dump file.
#include "collectives/flight_recorder.h"

#include <unistd.h>
#if defined(__x86_64__)
#include <x86intrin.h>
#endif

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <thread>

#include "core/dtype.h"
#include "core/env.h"
#include "core/file_io.h"
#include "core/host.h"

namespace ringlet::collectives {
namespace {

std::int64_t now_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

}  // namespace

FlightRecorder::FlightRecorder(std::size_t capacity)
    : capacity_(capacity), records_(capacity), start_ns_(now_ns()), start_tick_(tick_now()) {}

std::uint64_t FlightRecorder::tick_now() {
#if defined(__x86_64__)
  return __rdtsc();
#else
  return static_cast<std::uint64_t>(std::chrono::steady_clock::now().time_since_epoch().count());
#endif
}

FlightRecorder::TickScale FlightRecorder::tick_scale() const {
  const std::int64_t now = now_ns();
  const std::uint64_t now_tick = tick_now();
  const double ns_per_tick =
      now_tick > start_tick_
          ? static_cast<double>(now - start_ns_) / static_cast<double>(now_tick - start_tick_)
          : 1.0;
  return {ns_per_tick, now, now_tick};
}

std::int64_t FlightRecorder::TickScale::to_ns(std::uint64_t tick) const {
  if (tick == 0) return 0;
  const double before = static_cast<double>(static_cast<std::int64_t>(now_tick - tick));
  return now_ns - static_cast<std::int64_t>(before * ns_per_tick);
}

std::uint64_t FlightRecorder::issued(const FlightOp& op) {
  if (!enabled()) return 0;
  const std::uint64_t tick = tick_now();
  std::lock_guard lock(mutex_);
  const std::uint64_t id = next_id_++;
  Record& r = records_[id % capacity_];
  r.id = id;
  r.op = op;
  r.state = State::scheduled;
  r.created = tick;
  r.finished = 0;
  if (!r.error.empty()) r.error.clear();
  r.timed_out = false;
  r.waiting_on = -1;
  r.bytes_done = 0;
  return id;
}

FlightRecorder::Record* FlightRecorder::find(std::uint64_t id) {
  if (id == 0 || !enabled()) return nullptr;
  Record& r = records_[id % capacity_];
  return r.id == id ? &r : nullptr;
}

// The state only: a third clock reading would cost a small op a percent more (a record's
// times are its issue and its end; a started op's wait is measured from its issue).
void FlightRecorder::started(std::uint64_t id) {
  if (id == 0) return;
  std::lock_guard lock(mutex_);
  if (Record* r = find(id); r != nullptr && r->state == State::scheduled) {
    r->state = State::started;
  }
}

void FlightRecorder::completed(std::uint64_t id) {
  if (id == 0) return;
  const std::uint64_t tick = tick_now();
  std::lock_guard lock(mutex_);
  if (Record* r = find(id); r != nullptr && r->state != State::failed) {
    r->finished = tick;
    r->state = State::completed;
  }
}

void FlightRecorder::failed(std::uint64_t id, const std::string& error, bool timed_out,
                            int waiting_on, std::uint64_t bytes_done) {
  if (id == 0) return;
  std::lock_guard lock(mutex_);
  if (Record* r = find(id); r != nullptr && r->state != State::failed) {
    r->state = State::failed;
    r->finished = tick_now();
    r->error = error;
    r->timed_out = timed_out;
    r->waiting_on = waiting_on;
    r->bytes_done = bytes_done;
  }
}

const char* FlightRecorder::state_name(State state) {
  switch (state) {
    case State::scheduled: return "scheduled";
    case State::started: return "started";
    case State::completed: return "completed";
    case State::failed: return "failed";
  }
  return "?";
}

std::string FlightRecorder::dump_json(int rank, int world_size, const std::string& name,
                                      const std::string& reason) const {
  nlohmann::json entries = nlohmann::json::array();
  // The tick's length from the recorder's life so far (at least 10 ms of it, for the precision).
  while (now_ns() - start_ns_ < 10'000'000)
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  const TickScale scale = tick_scale();
  {
    std::lock_guard lock(mutex_);
    std::vector<const Record*> live;
    for (const Record& r : records_) {
      if (r.id != 0) live.push_back(&r);
    }
    std::sort(live.begin(), live.end(), [](auto* a, auto* b) { return a->id < b->id; });
    for (const Record* r : live) {
      const std::string dtype(core::dtype_name(r->op.dtype));
      nlohmann::json e = {
          {"record_id", r->id},
          {r->op.collective ? "collective_seq_id" : "p2p_seq_id", r->op.seq},
          {"profiling_name", std::string("ringlet:") + op_kind_name(r->op.kind)},
          {"state", state_name(r->state)},
          {"input_sizes", nlohmann::json::array({nlohmann::json::array({r->op.count})})},
          {"input_dtypes", nlohmann::json::array({dtype})},
          {"bytes", r->op.bytes},
          {"algorithm", r->op.algorithm},
          {"transport", r->op.transport},
          {"time_created_ns", scale.to_ns(r->created)},
          {"time_discovered_completed_ns", scale.to_ns(r->finished)},
      };
      if (r->op.peer >= 0) e["peer"] = r->op.peer;
      if (r->state == State::failed) {
        e["error"] = r->error;
        e["timed_out"] = r->timed_out;
        e["waiting_on"] = r->waiting_on;
        e["bytes_done"] = r->bytes_done;
      }
      entries.push_back(std::move(e));
    }
  }
  const nlohmann::json doc = {{"version", 1},
                              {"rank", rank},
                              {"world_size", world_size},
                              {"pg_name", name},
                              {"host", core::host_name()},
                              {"pid", ::getpid()},
                              {"reason", reason},
                              {"time_dumped_ns", now_ns()},
                              {"entries", std::move(entries)}};
  return doc.dump(1);
}

FlightPosition FlightRecorder::position() const {
  FlightPosition at;
  at.enabled = enabled();
  if (!at.enabled) return at;
  const TickScale scale = tick_scale();
  std::lock_guard lock(mutex_);
  at.issued = next_id_ - 1;
  const std::uint64_t oldest = next_id_ > std::min(capacity_, kPositionScan)
                                   ? next_id_ - std::min(capacity_, kPositionScan)
                                   : 1;
  for (std::uint64_t id = next_id_ - 1; id >= oldest && id > 0; --id) {
    const Record& r = records_[id % capacity_];
    if (r.id != id || !r.op.collective) continue;
    const bool open = r.state == State::scheduled || r.state == State::started;
    const FlightMark mark{r.op.seq, r.op.kind, state_name(r.state),
                          scale.to_ns(open ? r.created : r.finished)};
    if (open) {
      at.open = mark;  // the oldest open one wins
    } else if (!at.last) {
      at.last = mark;
    }
  }
  return at;
}

std::string FlightRecorder::dump(const std::string& path, int rank, int world_size,
                                 const std::string& name, const std::string& reason) const {
  try {
    const std::filesystem::path file(path);
    if (file.has_parent_path()) std::filesystem::create_directories(file.parent_path());
    core::write_file_atomically(file, dump_json(rank, world_size, name, reason) + "\n");
    return "";
  } catch (const std::exception& e) {
    return e.what();
  }
}

std::size_t flight_recorder_size_from_env() {
  return static_cast<std::size_t>(core::env_int("RINGLET_FR_SIZE", 2000, 0, 10'000'000));
}

std::string flight_dump_path(const std::string& dir, int rank, const std::string& name) {
  std::string suffix;
  if (name != "comm") {
    suffix = "." + name;
    for (char& c : suffix) {
      if (c == '/') c = '_';
    }
  }
  return (std::filesystem::path(dir) / ("rank" + std::to_string(rank) + suffix + ".json")).string();
}

}  // namespace ringlet::collectives
