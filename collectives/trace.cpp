// Tracer and merge_traces: Chrome trace JSON ("X" complete events, one per collective step;
// pid = rank, tid = channel) as Perfetto and chrome://tracing read it. Timestamps are
// microseconds of std::chrono::steady_clock (CLOCK_MONOTONIC on Linux), which is one clock for
// every process on a host, so files of different ranks line up without any clock exchange.
// Files are written to a temporary name and renamed, so a reader never sees half a file.
#include "collectives/trace.h"

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>
#include <utility>

#include "core/error.h"
#include "core/file_io.h"
#include "core/log.h"

namespace ringlet::collectives {

namespace fs = std::filesystem;
using nlohmann::json;

namespace {

constexpr const char* kFilePrefix = "trace.rank";
constexpr const char* kFileSuffix = ".json";

double micros(std::chrono::steady_clock::time_point t) {
  return std::chrono::duration<double, std::micro>(t.time_since_epoch()).count();
}

std::string rank_file_name(int rank) { return core::str(kFilePrefix, rank, kFileSuffix); }

// The rank of a file named trace.rank<R>.json, or -1 for any other name.
int rank_of_file_name(const std::string& name) {
  const std::string prefix = kFilePrefix, suffix = kFileSuffix;
  if (name.size() <= prefix.size() + suffix.size()) return -1;
  if (name.compare(0, prefix.size(), prefix) != 0) return -1;
  if (name.compare(name.size() - suffix.size(), suffix.size(), suffix) != 0) return -1;
  const std::string digits =
      name.substr(prefix.size(), name.size() - prefix.size() - suffix.size());
  if (digits.size() > 9 ||
      !std::all_of(digits.begin(), digits.end(), [](char c) { return c >= '0' && c <= '9'; })) {
    return -1;
  }
  return std::stoi(digits);
}

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

std::string read_file(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  RINGLET_CHECK(in.is_open(), Error, "cannot read trace file '", path.string(),
                "': ", std::strerror(errno));
  std::ostringstream text;
  text << in.rdbuf();
  RINGLET_CHECK(!in.bad(), Error, "cannot read trace file '", path.string(), "'");
  return text.str();
}

// Checks the structure merge_traces relies on and that every event belongs to `rank`,
// so that a renamed or foreign file is reported instead of producing a confusing timeline.
void validate_rank_trace(const json& doc, int rank, const fs::path& path) {
  const std::string where = core::str("malformed trace file '", path.string(), "': ");
  RINGLET_CHECK(doc.is_object(), Error, where, "the top level is not a JSON object");
  const auto events = doc.find("traceEvents");
  RINGLET_CHECK(events != doc.end() && events->is_array(), Error, where,
                "no \"traceEvents\" array");
  for (std::size_t i = 0; i < events->size(); ++i) {
    const json& e = (*events)[i];
    RINGLET_CHECK(e.is_object(), Error, where, "event ", i, " is not an object");
    const auto ph = e.find("ph");
    RINGLET_CHECK(ph != e.end() && ph->is_string(), Error, where, "event ", i,
                  " has no \"ph\" string");
    const auto pid = e.find("pid");
    RINGLET_CHECK(pid != e.end() && pid->is_number_integer() && pid->get<int>() == rank, Error,
                  where, "event ", i, " has pid ", (pid == e.end() ? json() : *pid).dump(),
                  " but the file is rank ", rank, "'s");
    if (ph->get<std::string>() != "M") {
      const auto ts = e.find("ts");
      RINGLET_CHECK(ts != e.end() && ts->is_number(), Error, where, "event ", i,
                    " has no numeric \"ts\"");
    }
  }
}

}  // namespace

Tracer::Tracer(std::string dir, int rank) : dir_(std::move(dir)), rank_(rank) {
  // Create the directory now, so that a bad RINGLET_TRACE fails at startup rather than
  // after a whole run, when the trace is written.
  if (enabled()) make_directory(dir_);
}

Tracer::~Tracer() {
  try {
    flush();
  } catch (const std::exception& e) {
    core::log(core::LogLevel::error, "rank ", rank_, ": trace not written: ", e.what());
  }
}

void Tracer::record(TraceEvent event) {
  if (!enabled()) return;
  std::lock_guard<std::mutex> lock(mutex_);
  events_.push_back(std::move(event));
}

void Tracer::flush() {
  if (!enabled()) return;
  // The lock is held while writing so that two flushes cannot finish out of order and leave
  // the older snapshot on disk. Flushes are rare (end of run), so recorders seldom wait.
  std::lock_guard<std::mutex> lock(mutex_);
  json events = json::array();
  events.push_back(metadata_event("process_name", rank_, 0, {{"name", core::str("rank ", rank_)}}));
  events.push_back(metadata_event("process_sort_index", rank_, 0, {{"sort_index", rank_}}));
  std::set<int> channels;
  for (const TraceEvent& e : events_) channels.insert(e.channel);
  for (int channel : channels) {
    events.push_back(
        metadata_event("thread_name", rank_, channel, {{"name", core::str("channel ", channel)}}));
  }
  for (const TraceEvent& e : events_) {
    const double start = micros(e.start);
    events.push_back(json{
        {"name", core::str(e.phase, " step ", e.step)},
        {"cat", e.op},
        {"ph", "X"},
        {"ts", start},
        {"dur", std::max(0.0, micros(e.end) - start)},
        {"pid", rank_},
        {"tid", e.channel},
        {"args",
         {{"op", e.op},
          {"seq", e.seq},
          {"step", e.step},
          {"phase", e.phase},
          {"chunk", e.chunk},
          {"peer", e.peer},
          {"bytes", e.bytes}}},
    });
  }
  const json doc{{"traceEvents", std::move(events)}, {"displayTimeUnit", "ns"}};
  make_directory(dir_);  // again: it may have been removed since construction
  core::write_file_atomically(fs::path(dir_) / rank_file_name(rank_), doc.dump());
}

std::size_t merge_traces(const std::string& dir, const std::string& out) {
  std::error_code ec;
  RINGLET_CHECK(fs::is_directory(dir, ec), Error, "trace merge: '", dir, "' is not a directory",
                ec ? core::str(" (", ec.message(), ")") : "");
  std::vector<std::pair<int, fs::path>> files;
  for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
    const int rank = rank_of_file_name(it->path().filename().string());
    if (rank >= 0 && it->is_regular_file()) files.emplace_back(rank, it->path());
  }
  RINGLET_CHECK(!ec, Error, "trace merge: cannot list '", dir, "': ", ec.message());
  RINGLET_CHECK(!files.empty(), Error, "trace merge: no trace files (", kFilePrefix, "<R>",
                kFileSuffix, ") in '", dir, "'");
  std::sort(files.begin(), files.end());

  json merged = json::array();
  for (const auto& [rank, path] : files) {
    json doc;
    try {
      doc = json::parse(read_file(path));
    } catch (const json::exception& e) {
      RINGLET_THROW(Error, "malformed trace file '", path.string(), "': ", e.what());
    }
    validate_rank_trace(doc, rank, path);
    for (json& event : doc["traceEvents"]) merged.push_back(std::move(event));
  }
  const std::size_t count = merged.size();
  const json doc{{"traceEvents", std::move(merged)}, {"displayTimeUnit", "ns"}};
  make_directory(fs::path(out).parent_path());
  core::write_file_atomically(out, doc.dump());
  return count;
}

}  // namespace ringlet::collectives
