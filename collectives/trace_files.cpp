// load_traces and merge_traces: the reading side of trace.h's files.
#include "collectives/trace_files.h"

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>
#include <utility>

#include "collectives/trace.h"
#include "core/error.h"
#include "core/file_io.h"

namespace ringlet::collectives {

namespace fs = std::filesystem;
using nlohmann::json;

namespace {

std::string read_file(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  RINGLET_CHECK(in.is_open(), Error, "cannot read trace file '", path.string(),
                "': ", std::strerror(errno));
  std::ostringstream text;
  text << in.rdbuf();
  RINGLET_CHECK(!in.bad(), Error, "cannot read trace file '", path.string(), "'");
  return text.str();
}

// The fields the readers take when present must have their types: "dur" a number, "tid" an
// integer, "name" and "cat" strings, "args" an object of numbers and strings.
void check_optional_fields(const json& e, const std::string& where, std::size_t i) {
  const auto has = [&](const char* key, bool (json::*is)() const noexcept) {
    const auto it = e.find(key);
    RINGLET_CHECK(it == e.end() || ((*it).*is)(), Error, where, "event ", i, "'s \"", key, "\" is ",
                  it->dump(), ", of the wrong type");
  };
  has("dur", &json::is_number);
  has("tid", &json::is_number_integer);
  has("name", &json::is_string);
  has("cat", &json::is_string);
  has("args", &json::is_object);
  const auto args = e.find("args");
  if (args == e.end()) return;
  for (const auto& [key, value] : args->items()) {
    RINGLET_CHECK(value.is_number() || value.is_string(), Error, where, "event ", i, "'s args.",
                  key, " is ", value.dump(), ", not a number or a string");
  }
}

// Checks the structure the readers rely on and that every event belongs to `rank`.
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
      check_optional_fields(e, where, i);
    }
  }
}

std::vector<std::pair<int, fs::path>> rank_files(const std::string& dir, const std::string& what) {
  std::error_code ec;
  RINGLET_CHECK(fs::is_directory(dir, ec), Error, what, ": '", dir, "' is not a directory",
                ec ? core::str(" (", ec.message(), ")") : "");
  std::vector<std::pair<int, fs::path>> files;
  for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
    const int rank = trace_file_rank(it->path().filename().string());
    if (rank >= 0 && it->is_regular_file()) files.emplace_back(rank, it->path());
  }
  RINGLET_CHECK(!ec, Error, what, ": cannot list '", dir, "': ", ec.message());
  RINGLET_CHECK(!files.empty(), Error, what, ": no trace files (", kTraceFilePrefix, "<R>",
                kTraceFileSuffix, ") in '", dir, "'");
  std::sort(files.begin(), files.end());
  return files;
}

}  // namespace

int trace_file_rank(const std::string& name) {
  const std::string prefix = kTraceFilePrefix, suffix = kTraceFileSuffix;
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

std::vector<RankTrace> load_traces(const std::string& dir, const std::string& what) {
  std::vector<RankTrace> traces;
  for (const auto& [rank, path] : rank_files(dir, what)) {
    json doc;
    try {
      doc = json::parse(read_file(path));
    } catch (const json::exception& e) {
      RINGLET_THROW(Error, "malformed trace file '", path.string(), "': ", e.what());
    }
    validate_rank_trace(doc, rank, path);
    traces.push_back(RankTrace{rank, path, std::move(doc["traceEvents"])});
  }
  return traces;
}

std::size_t merge_traces(const std::string& dir, const std::string& out) {
  json merged = json::array();
  for (RankTrace& trace : load_traces(dir, "trace merge")) {
    for (json& event : trace.events) merged.push_back(std::move(event));
  }
  const std::size_t count = merged.size();
  const json doc{{"traceEvents", std::move(merged)}, {"displayTimeUnit", "ns"}};
  const fs::path parent = fs::path(out).parent_path();
  if (!parent.empty()) {
    std::error_code ec;
    fs::create_directories(parent, ec);
    RINGLET_CHECK(!ec, Error, "cannot create directory '", parent.string(), "': ", ec.message());
  }
  core::write_file_atomically(out, doc.dump());
  return count;
}

}  // namespace ringlet::collectives
