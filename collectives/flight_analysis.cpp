// The dumps' JSON, then the story: the first op some rank did not complete, who was where in
// it, what the missing dumps mean, desyncs, and the arrival skew of the last ops.
#include "collectives/flight_analysis.h"

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <regex>
#include <set>
#include <sstream>
#include <tuple>

#include "core/error.h"

namespace ringlet::collectives {
namespace {

using Json = nlohmann::json;

FlightEntry parse_entry(const Json& e) {
  FlightEntry f;
  f.collective = e.contains("collective_seq_id");
  f.seq = e.at(f.collective ? "collective_seq_id" : "p2p_seq_id").get<std::uint64_t>();
  f.op = e.at("profiling_name").get<std::string>();
  if (f.op.rfind("ringlet:", 0) == 0) f.op = f.op.substr(8);
  f.dtype = e.at("input_dtypes").at(0).get<std::string>();
  f.count = e.at("input_sizes").at(0).at(0).get<std::uint64_t>();
  f.bytes = e.at("bytes").get<std::uint64_t>();
  f.algorithm = e.value("algorithm", "");
  f.transport = e.value("transport", "");
  f.state = e.at("state").get<std::string>();
  f.created_ns = e.at("time_created_ns").get<std::int64_t>();
  f.finished_ns = e.value("time_discovered_completed_ns", std::int64_t{0});
  f.error = e.value("error", "");
  f.timed_out = e.value("timed_out", false);
  f.waiting_on = e.value("waiting_on", -1);
  f.bytes_done = e.value("bytes_done", std::uint64_t{0});
  return f;
}

std::string describe(const FlightEntry& e) { return core::str(e.op, " ", e.dtype, " x ", e.count); }

std::string ranks_text(const std::vector<int>& ranks) {
  std::string text = ranks.size() == 1 ? "rank " : "ranks ";
  for (std::size_t i = 0; i < ranks.size(); ++i) {
    text += (i == 0 ? "" : i + 1 == ranks.size() ? " and " : ", ") + std::to_string(ranks[i]);
  }
  return text;
}

// Each dump's collectives by sequence number.
using BySeq = std::map<std::uint64_t, const FlightEntry*>;
std::map<int, BySeq> collectives_by_rank(const std::vector<FlightDump>& dumps) {
  std::map<int, BySeq> out;
  for (const FlightDump& d : dumps) {
    for (const FlightEntry& e : d.entries) {
      if (e.collective) out[d.rank][e.seq] = &e;
    }
  }
  return out;
}

// The first op some rank with a dump did not complete (or never issued); none when every rank
// completed everything it issued and they issued the same number.
std::optional<std::uint64_t> first_open_op(const std::map<int, BySeq>& by_rank) {
  std::optional<std::uint64_t> open;
  std::uint64_t last = 0;
  for (const auto& [rank, ops] : by_rank) {
    if (!ops.empty()) last = std::max(last, ops.rbegin()->first);
  }
  for (const auto& [rank, ops] : by_rank) {
    std::uint64_t mine = ops.empty() ? 0 : ops.rbegin()->first + 1;
    for (const auto& [seq, e] : ops) {
      if (e->state != "completed") {
        mine = seq;
        break;
      }
    }
    if (mine <= last && (!open || mine < *open)) open = mine;
  }
  return open;
}

// The first sequence number at which two ranks issued different ops.
void add_desync(const std::map<int, BySeq>& by_rank, std::vector<std::string>& lines) {
  std::map<std::uint64_t, std::vector<std::pair<int, const FlightEntry*>>> at;
  for (const auto& [rank, ops] : by_rank) {
    for (const auto& [seq, e] : ops) at[seq].emplace_back(rank, e);
  }
  for (const auto& [seq, list] : at) {
    for (const auto& [rank, e] : list) {
      const auto& [first_rank, first] = list.front();
      if (describe(*e) != describe(*first)) {
        lines.push_back(core::str("desync at op #", seq, ": rank ", first_rank, " issued ",
                                  describe(*first), ", rank ", rank, " issued ", describe(*e)));
        return;
      }
    }
  }
}

// What the ranks without a dump did, as their peers saw it at op #seq.
void add_missing(const std::vector<int>& missing, std::uint64_t seq,
                 const std::map<int, BySeq>& by_rank, std::vector<std::string>& lines) {
  for (const int p : missing) {
    std::vector<int> timed_out, cut_off;
    // A rank that timed out without naming a peer (a device op's flags) waited for someone:
    // counted against every rank that left no dump.
    for (const auto& [rank, ops] : by_rank) {
      const auto it = ops.find(seq);
      if (it == ops.end()) continue;
      const FlightEntry& e = *it->second;
      if (e.waiting_on == p || (e.waiting_on < 0 && e.timed_out)) {
        (e.timed_out ? timed_out : cut_off).push_back(rank);
      }
    }
    if (!timed_out.empty()) {
      lines.push_back(core::str("rank ", p, " never joined op #", seq, ", or stalled in it: ",
                                ranks_text(timed_out), " waited for it until the deadline, and it ",
                                "left no dump (stopped, hung outside the communicator, or dead)"));
    } else if (!cut_off.empty()) {
      lines.push_back(core::str("rank ", p, " died: its connection to ", ranks_text(cut_off),
                                " failed in op #", seq, ", and it left no dump"));
    } else {
      lines.push_back(core::str("rank ", p, " left no dump (dead, or stopped)"));
    }
  }
}

// Who of the ranks with a dump was where in op #seq.
void add_positions(std::uint64_t seq, const std::map<int, BySeq>& by_rank,
                   std::vector<std::string>& lines) {
  for (const auto& [rank, ops] : by_rank) {
    const auto it = ops.find(seq);
    if (it == ops.end()) {
      const std::string last =
          ops.empty() ? "none" : core::str("#", ops.rbegin()->first, " ", ops.rbegin()->second->op);
      lines.push_back(
          core::str("rank ", rank, " never joined op #", seq, " (its last op: ", last, ")"));
      continue;
    }
    const FlightEntry& e = *it->second;
    if (e.state == "completed") {
      lines.push_back(core::str("rank ", rank, " completed op #", seq, " (", describe(e), ")"));
    } else if (e.state == "failed") {
      lines.push_back(core::str(
          "rank ", rank, " stalled in op #", seq, " (", describe(e), ", ", e.algorithm, ")",
          e.waiting_on >= 0 ? core::str(" waiting on rank ", e.waiting_on) : std::string(),
          " after ", e.bytes_done, " bytes", e.timed_out ? ", until its deadline" : "", ": ",
          e.error.substr(0, e.error.find('\n'))));
    } else {
      lines.push_back(
          core::str("rank ", rank, " was in op #", seq, " (", describe(e), "), ", e.state));
    }
  }
}

// The arrival skew of the last few ops up to `until` that every dump holds: how long after the
// first rank the last one issued it.
void add_skew(const std::map<int, BySeq>& by_rank, std::uint64_t until,
              std::vector<std::string>& lines) {
  std::map<std::uint64_t, std::vector<std::pair<std::int64_t, int>>> arrivals;
  for (const auto& [rank, ops] : by_rank) {
    for (const auto& [seq, e] : ops) {
      if (seq <= until) arrivals[seq].emplace_back(e->created_ns, rank);
    }
  }
  std::vector<std::string> rows;
  for (auto it = arrivals.rbegin(); it != arrivals.rend() && rows.size() < 5; ++it) {
    if (it->second.size() != by_rank.size() || by_rank.size() < 2) continue;
    const auto [first, last] = std::minmax_element(it->second.begin(), it->second.end());
    char ms[32];
    std::snprintf(ms, sizeof ms, "%.3f", static_cast<double>(last->first - first->first) / 1e6);
    rows.push_back(core::str("  op #", it->first, ": rank ", last->second, " arrived last, ", ms,
                             " ms after rank ", first->second));
  }
  if (rows.empty()) return;
  lines.push_back("arrival skew of the last ops every dump holds:");
  lines.insert(lines.end(), rows.rbegin(), rows.rend());
}

}  // namespace

FlightDump parse_flight_dump(const std::string& text, const std::string& file) {
  try {
    const Json doc = Json::parse(text);
    FlightDump d;
    d.file = file;
    d.rank = doc.at("rank").get<int>();
    d.world_size = doc.at("world_size").get<int>();
    d.name = doc.value("pg_name", "");
    d.host = doc.value("host", "");
    d.pid = doc.value("pid", std::int64_t{0});
    d.reason = doc.value("reason", "");
    for (const Json& e : doc.at("entries")) d.entries.push_back(parse_entry(e));
    RINGLET_CHECK(d.rank >= 0 && d.rank < d.world_size, ValueError, "rank ", d.rank,
                  " is outside the world of ", d.world_size);
    return d;
  } catch (const std::exception& e) {
    RINGLET_THROW(ValueError, file, " is not a flight recorder dump: ", e.what());
  }
}

std::vector<FlightDump> read_flight_dumps(const std::string& dir) {
  const std::regex name(R"(rank\d+(\..+)?\.json)");
  std::vector<FlightDump> dumps;
  std::error_code ec;
  for (std::filesystem::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
    if (!std::regex_match(it->path().filename().string(), name)) continue;
    std::ifstream in(it->path());
    std::stringstream text;
    text << in.rdbuf();
    dumps.push_back(parse_flight_dump(text.str(), it->path().string()));
  }
  RINGLET_CHECK(!ec, ValueError, "cannot read the directory ", dir, ": ", ec.message());
  RINGLET_CHECK(!dumps.empty(), ValueError, dir,
                " holds no flight recorder dump (rank<R>.json; RINGLET_FR_DIR names where ranks "
                "write them)");
  std::sort(dumps.begin(), dumps.end(),
            [](auto& a, auto& b) { return std::tie(a.name, a.rank) < std::tie(b.name, b.rank); });
  return dumps;
}

std::vector<std::string> diagnose_flight(const std::vector<FlightDump>& dumps) {
  std::vector<std::string> lines;
  int world = 0;
  std::set<int> present;
  for (const FlightDump& d : dumps) {
    world = std::max(world, d.world_size);
    present.insert(d.rank);
  }
  std::vector<int> missing;
  for (int r = 0; r < world; ++r) {
    if (!present.contains(r)) missing.push_back(r);
  }
  const std::map<int, BySeq> by_rank = collectives_by_rank(dumps);
  const std::optional<std::uint64_t> open = first_open_op(by_rank);
  if (open) add_missing(missing, *open, by_rank, lines);
  add_desync(by_rank, lines);
  if (open) {
    add_positions(*open, by_rank, lines);
  } else {
    lines.push_back("every rank with a dump completed every op it issued");
    if (!missing.empty()) lines.push_back(ranks_text(missing) + " left no dump");
  }
  lines.push_back(
      core::str(present.size(), " of ", world, " ranks left a dump",
                missing.empty() ? std::string() : "; none from " + ranks_text(missing)));
  for (const FlightDump& d : dumps) {
    if (!d.reason.empty()) {
      lines.push_back(
          core::str("rank ", d.rank, " dumped because: ", d.reason.substr(0, d.reason.find('\n'))));
    }
  }
  add_skew(by_rank, open.value_or(~std::uint64_t{0}), lines);
  return lines;
}

}  // namespace ringlet::collectives
