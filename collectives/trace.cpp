// Tracer: Chrome trace JSON ("X" complete events, one per collective step, pid = rank,
// tid = channel; compute spans on tid kComputeLane) as Perfetto and chrome://tracing read it.
// Timestamps are microseconds of std::chrono::steady_clock (CLOCK_MONOTONIC on Linux), which is one
// clock for every process on a host, so files of different ranks line up without any clock
// exchange. Files are written to a temporary name and renamed, so a reader never sees half a file.
#include "collectives/trace.h"

#include <algorithm>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <set>
#include <utility>

#include "core/error.h"
#include "core/file_io.h"
#include "core/log.h"

namespace ringlet::collectives {

namespace fs = std::filesystem;
using nlohmann::json;

namespace {

double micros(std::chrono::steady_clock::time_point t) {
  return std::chrono::duration<double, std::micro>(t.time_since_epoch()).count();
}

std::string rank_file_name(int rank) { return core::str(kTraceFilePrefix, rank, kTraceFileSuffix); }

void make_directory(const fs::path& dir) {
  if (dir.empty()) return;
  std::error_code ec;
  fs::create_directories(dir, ec);
  RINGLET_CHECK(!ec, Error, "cannot create directory '", dir.string(), "': ", ec.message());
  RINGLET_CHECK(fs::is_directory(dir, ec), Error, "'", dir.string(),
                "' exists but is not a directory");
}

json metadata_event(const char* name, int pid, int tid, json args) {
  return json{{"name", name}, {"ph", "M"}, {"pid", pid}, {"tid", tid}, {"args", std::move(args)}};
}

void append_lane_names(json& events, int rank, const std::vector<TraceEvent>& steps,
                       const std::vector<TraceSpan>& spans) {
  std::set<int> channels;
  for (const TraceEvent& e : steps) channels.insert(e.channel);
  for (int lane : channels) {
    const std::string name = is_host_ring_lane(lane)
                                 ? core::str("channel ", lane - kHostRingLane, " host ring")
                                 : core::str("channel ", lane);
    events.push_back(metadata_event("thread_name", rank, lane, {{"name", name}}));
  }
  if (!spans.empty()) {
    events.push_back(metadata_event("thread_name", rank, kComputeLane, {{"name", "compute"}}));
    // Sorted first, above the channels, as a profiler shows the host thread above its streams.
    events.push_back(metadata_event("thread_sort_index", rank, kComputeLane, {{"sort_index", -1}}));
  }
}

json step_event(const TraceEvent& e, int rank) {
  const double start = micros(e.start);
  return json{
      {"name", core::str(e.phase, " step ", e.step)},
      {"cat", e.op},
      {"ph", "X"},
      {"ts", start},
      {"dur", std::max(0.0, micros(e.end) - start)},
      {"pid", rank},
      {"tid", e.channel},
      {"args",
       {{"op", e.op},
        {"seq", e.seq},
        {"step", e.step},
        {"phase", e.phase},
        {"chunk", e.chunk},
        {"peer", e.peer},
        {"bytes", e.bytes}}},
  };
}

json span_event(const TraceSpan& s, int rank) {
  const double start = micros(s.start);
  json event{{"name", s.name}, {"cat", s.category},   {"ts", start},
             {"pid", rank},    {"tid", kComputeLane}, {"args", json::object()}};
  if (s.end == s.start) {
    event["ph"] = "i";
    event["s"] = "t";  // an instant on its own row
  } else {
    event["ph"] = "X";
    event["dur"] = std::max(0.0, micros(s.end) - start);
  }
  if (s.index >= 0) event["args"]["index"] = s.index;
  if (s.bytes > 0) event["args"]["bytes"] = s.bytes;
  return event;
}

}  // namespace

Tracer::Tracer(std::string dir, int rank) : rank_(rank) { open(dir); }

void Tracer::open(const std::string& dir) {
  if (dir.empty()) return;
  std::lock_guard<std::mutex> lock(mutex_);
  if (!dir_.empty()) return;  // RINGLET_TRACE named one already: everything goes there
  // Create the directory now, so that a bad directory fails at startup rather than after a
  // whole run, when the trace is written.
  make_directory(dir);
  dir_ = dir;
  recording_ = true;
}

void Tracer::set_recording(bool on) {
  std::lock_guard<std::mutex> lock(mutex_);
  recording_ = on && !dir_.empty();
}

Tracer::~Tracer() {
  try {
    flush();
  } catch (const std::exception& e) {
    core::log(core::LogLevel::error, "rank ", rank_, ": trace not written: ", e.what());
  }
}

void Tracer::close() {
  recording_ = false;
  flush();
  std::lock_guard<std::mutex> lock(mutex_);
  dir_.clear();
  events_.clear();
  spans_.clear();
}

void Tracer::record(TraceEvent event) {
  if (!enabled()) return;
  std::lock_guard<std::mutex> lock(mutex_);
  events_.push_back(std::move(event));
}

void Tracer::record(TraceSpan span) {
  if (!enabled()) return;
  std::lock_guard<std::mutex> lock(mutex_);
  spans_.push_back(std::move(span));
}

void Tracer::flush() {
  // The lock is held while writing so that two flushes cannot finish out of order and leave
  // the older snapshot on disk. Flushes are rare (end of run), so recorders seldom wait.
  std::lock_guard<std::mutex> lock(mutex_);
  if (dir_.empty()) return;
  json events = json::array();
  events.push_back(metadata_event("process_name", rank_, 0, {{"name", core::str("rank ", rank_)}}));
  events.push_back(metadata_event("process_sort_index", rank_, 0, {{"sort_index", rank_}}));
  append_lane_names(events, rank_, events_, spans_);
  for (const TraceEvent& e : events_) events.push_back(step_event(e, rank_));
  for (const TraceSpan& s : spans_) events.push_back(span_event(s, rank_));
  const json doc{{"traceEvents", std::move(events)}, {"displayTimeUnit", "ns"}};
  make_directory(dir_);  // again: it may have been removed since construction
  core::write_file_atomically(fs::path(dir_) / rank_file_name(rank_), doc.dump());
}

TraceScope::TraceScope(Tracer* tracer, std::string name, std::string category, std::int64_t index)
    : tracer_(tracer != nullptr && tracer->enabled() ? tracer : nullptr) {
  if (tracer_ == nullptr) return;
  span_.name = std::move(name);
  span_.category = std::move(category);
  span_.index = index;
  span_.start = std::chrono::steady_clock::now();
}

TraceScope::~TraceScope() {
  if (tracer_ == nullptr) return;
  span_.end = std::chrono::steady_clock::now();
  tracer_->record(std::move(span_));
}

}  // namespace ringlet::collectives
