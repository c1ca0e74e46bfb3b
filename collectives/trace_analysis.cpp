// Reading collective steps and compute spans back from trace events, grouping them, and the
// alpha-beta model (fitted or from p2p_perf).
#include "collectives/trace_analysis.h"

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <limits>
#include <map>
#include <tuple>
#include <utility>

#include "collectives/trace.h"
#include "core/error.h"

namespace ringlet::collectives {

using nlohmann::json;

namespace {

bool is_step_event(const json& e) {
  if (e.value("ph", "") != "X") return false;
  const auto args = e.find("args");
  return args != e.end() && args->is_object() && args->contains("op") && args->contains("phase") &&
         args->contains("bytes");
}

StepRecord step_of(const json& e, int rank) {
  const json& a = e["args"];
  StepRecord s;
  s.rank = rank;
  s.op = a.value("op", "");
  s.seq = a.value("seq", std::uint64_t{0});
  s.step = a.value("step", 0);
  s.phase = a.value("phase", "");
  s.chunk = a.value("chunk", -1);
  s.peer = a.value("peer", -1);
  s.channel = e.value("tid", 0);
  s.bytes = a.value("bytes", std::uint64_t{0});
  s.start_us = e.value("ts", 0.0);
  s.dur_us = e.value("dur", 0.0);
  return s;
}

// Least squares of t = alpha + g * bytes over the points, with alpha clamped at 0 (then g is
// the fit through the origin).
std::pair<double, double> fit_line(const std::vector<std::pair<double, double>>& points) {
  double n = 0, sx = 0, sy = 0, sxx = 0, sxy = 0;
  for (const auto& [x, y] : points) {
    n += 1;
    sx += x;
    sy += y;
    sxx += x * x;
    sxy += x * y;
  }
  const double denom = n * sxx - sx * sx;
  double g = denom > 0 ? (n * sxy - sx * sy) / denom : 0.0;
  double alpha = (sy - g * sx) / n;
  if (alpha < 0 || g <= 0) {
    alpha = 0;
    g = sxy / sxx;
  }
  return {alpha, g};
}

}  // namespace

std::string bytes_text(std::uint64_t bytes) {
  const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  double value = static_cast<double>(bytes);
  int u = 0;
  while (value >= 1024 && u < 4) {
    value /= 1024;
    ++u;
  }
  char text[32];
  std::snprintf(text, sizeof text, u == 0 || value >= 10 ? "%.0f %s" : "%.1f %s", value, units[u]);
  return text;
}

std::vector<StepRecord> step_records(const std::vector<RankTrace>& traces) {
  std::vector<StepRecord> steps;
  for (const RankTrace& t : traces) {
    for (std::size_t i = 0; i < t.events.size(); ++i) {
      try {
        if (is_step_event(t.events[i])) steps.push_back(step_of(t.events[i], t.rank));
      } catch (const json::exception& e) {
        RINGLET_THROW(Error, "malformed trace file '", t.path.string(), "': event ", i, ": ",
                      e.what());
      }
    }
  }
  return steps;
}

std::vector<SpanRecord> span_records(const std::vector<RankTrace>& traces) {
  std::vector<SpanRecord> spans;
  for (const RankTrace& t : traces) {
    for (const json& e : t.events) {
      // load_traces checked the types of every field read here (trace_files.cpp).
      const std::string ph = e.value("ph", "");
      if ((ph != "X" && ph != "i") || e.value("tid", -1) != kComputeLane) continue;
      SpanRecord s;
      s.rank = t.rank;
      s.name = e.value("name", "");
      s.category = e.value("cat", "");
      s.start_us = e.value("ts", 0.0);
      s.dur_us = ph == "X" ? e.value("dur", 0.0) : 0.0;
      const auto args = e.find("args");
      if (args != e.end() && args->contains("index") && (*args)["index"].is_number_integer()) {
        s.index = (*args)["index"].get<std::int64_t>();
      }
      spans.push_back(std::move(s));
    }
  }
  std::sort(spans.begin(), spans.end(), [](const SpanRecord& a, const SpanRecord& b) {
    return std::tie(a.rank, a.start_us) < std::tie(b.rank, b.start_us);
  });
  return spans;
}

std::vector<CollectiveRecord> group_collectives(std::vector<StepRecord> steps) {
  std::map<std::pair<std::uint64_t, std::string>, CollectiveRecord> by_key;
  for (StepRecord& s : steps) {
    CollectiveRecord& c = by_key[{s.seq, s.op}];
    c.op = s.op;
    c.seq = s.seq;
    c.steps.push_back(std::move(s));
  }
  std::vector<CollectiveRecord> out;
  for (auto& [key, c] : by_key) {
    std::sort(c.steps.begin(), c.steps.end(), [](const StepRecord& a, const StepRecord& b) {
      return std::tie(a.rank, a.channel, a.start_us) < std::tie(b.rank, b.channel, b.start_us);
    });
    std::map<int, std::uint64_t> bytes_of_rank;
    c.start_us = std::numeric_limits<double>::infinity();
    c.end_us = -std::numeric_limits<double>::infinity();
    for (const StepRecord& s : c.steps) {
      bytes_of_rank[s.rank] += s.bytes;
      c.start_us = std::min(c.start_us, s.start_us);
      c.end_us = std::max(c.end_us, s.start_us + s.dur_us);
    }
    c.ranks = static_cast<int>(bytes_of_rank.size());
    for (const auto& [rank, bytes] : bytes_of_rank) c.rank_bytes = std::max(c.rank_bytes, bytes);
    out.push_back(std::move(c));
  }
  return out;
}

AlphaBeta fit_alpha_beta(const std::vector<StepRecord>& steps) {
  std::map<std::uint64_t, double> fastest;  // bytes -> the shortest step of that size
  for (const StepRecord& s : steps) {
    if (s.bytes == 0 || s.dur_us <= 0) continue;
    auto [it, fresh] = fastest.try_emplace(s.bytes, s.dur_us);
    if (!fresh) it->second = std::min(it->second, s.dur_us);
  }
  RINGLET_CHECK(!fastest.empty(), ValueError,
                "the trace has no collective step that moved bytes: nothing to fit");
  AlphaBeta model;
  if (fastest.size() == 1) {
    const auto& [bytes, us] = *fastest.begin();
    model.beta_gbps = static_cast<double>(bytes) / us / 1e3;
    model.source = core::str("every step moved ", bytes_text(bytes),
                             ": alpha and beta cannot be told apart (alpha taken as 0; give "
                             "--p2p FILE from p2p_perf to separate them)");
    return model;
  }
  std::vector<std::pair<double, double>> points;
  for (const auto& [bytes, us] : fastest) points.emplace_back(static_cast<double>(bytes), us);
  const auto [alpha, us_per_byte] = fit_line(points);
  model.alpha_us = alpha;
  model.beta_gbps = 1.0 / us_per_byte / 1e3;
  model.source =
      core::str("fitted through the fastest step of each of ", fastest.size(), " message sizes (",
                bytes_text(static_cast<std::uint64_t>(points.front().first)), " .. ",
                bytes_text(static_cast<std::uint64_t>(points.back().first)), ")");
  return model;
}

AlphaBeta alpha_beta_from_p2p(const std::string& path, const std::string& transport) {
  std::ifstream in(path);
  RINGLET_CHECK(in.is_open(), ValueError, "cannot read p2p_perf output '", path, "'");
  double latency = std::numeric_limits<double>::infinity(), bandwidth = 0;
  std::string line;
  for (int number = 1; std::getline(in, line); ++number) {
    if (line.empty() || line[0] != '{') continue;  // p2p_perf's other lines
    json j;
    try {
      j = json::parse(line);
    } catch (const json::exception& e) {
      RINGLET_THROW(ValueError, path, ":", number, ": not a JSON line: ", e.what());
    }
    try {
      if (j.value("bench", "") != "p2p_perf" || j.value("transport", "") != transport) continue;
      if (j.value("nsocks", 1) != 1) continue;
      if (j.value("test", "") == "latency") latency = std::min(latency, j.value("us", latency));
      if (j.value("test", "") == "bandwidth") bandwidth = std::max(bandwidth, j.value("gbps", 0.0));
    } catch (const json::exception& e) {
      RINGLET_THROW(ValueError, path, ":", number, ": not a p2p_perf record: ", e.what());
    }
  }
  RINGLET_CHECK(bandwidth > 0 && latency < std::numeric_limits<double>::infinity(), ValueError, "'",
                path, "' has no p2p_perf latency and bandwidth lines for transport '", transport,
                "' (run: p2p_perf --transports ", transport, ")");
  return AlphaBeta{latency, bandwidth,
                   core::str("p2p_perf on ", transport,
                             ": smallest one-way latency, best "
                             "streaming bandwidth (",
                             path, ")")};
}

const CollectiveRecord& pick_collective(const std::vector<CollectiveRecord>& collectives,
                                        std::int64_t seq) {
  RINGLET_CHECK(!collectives.empty(), ValueError, "the trace holds no collective steps");
  if (seq >= 0) {
    for (const CollectiveRecord& c : collectives) {
      if (c.seq == static_cast<std::uint64_t>(seq)) return c;
    }
    RINGLET_THROW(ValueError, "no collective numbered ", seq, " in the trace (it holds ",
                  collectives.front().seq, " .. ", collectives.back().seq, ")");
  }
  const CollectiveRecord* best = &collectives.front();
  for (const CollectiveRecord& c : collectives) {
    if (c.rank_bytes > best->rank_bytes) best = &c;
  }
  return *best;
}

double model_us(const CollectiveRecord& collective, const AlphaBeta& model) {
  std::map<std::pair<int, int>, double> per_lane;  // (rank, channel) -> predicted us
  for (const StepRecord& s : collective.steps) {
    per_lane[{s.rank, s.channel}] += model.predict_us(s.bytes);
  }
  double longest = 0;
  for (const auto& [lane, us] : per_lane) longest = std::max(longest, us);
  return longest;
}

TimeSplit split_time(const CollectiveRecord& collective, const AlphaBeta& model) {
  TimeSplit t;
  for (const StepRecord& s : collective.steps) {
    t.measured_us += s.dur_us;
    t.alpha_us += model.alpha_us;
    t.bytes_us += static_cast<double>(s.bytes) / (model.beta_gbps * 1e3);
  }
  t.beyond_us = std::max(0.0, t.measured_us - t.alpha_us - t.bytes_us);
  return t;
}

}  // namespace ringlet::collectives
