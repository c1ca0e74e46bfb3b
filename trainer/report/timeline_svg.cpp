// The two timelines: rows of boxes on a shared time axis (microseconds from the first event).
#include "trainer/report/timeline_svg.h"

#include <algorithm>
#include <limits>
#include <map>
#include <set>
#include <sstream>
#include <utility>

#include "collectives/trace.h"
#include "core/error.h"
#include "trainer/report/svg_chart.h"

namespace ringlet::trainer::report {

using collectives::CollectiveRecord;
using collectives::SpanRecord;
using collectives::StepRecord;

namespace {

constexpr double kLabelWidth = 120, kRowHeight = 22, kTop = 24, kWidth = 900;

// Time (us) to x within [t0, t1].
struct TimeAxis {
  double t0, t1;
  double x(double t) const {
    const double span = t1 > t0 ? t1 - t0 : 1.0;
    return kLabelWidth + (t - t0) / span * (kWidth - kLabelWidth - 10);
  }
};

void box(std::ostringstream& svg, const TimeAxis& axis, double start, double dur, double y,
         double height, const std::string& color, const std::string& label,
         const std::string& title) {
  const double x = axis.x(start), w = std::max(1.0, axis.x(start + dur) - x);
  svg << "<g><title>" << escape_html(title) << "</title><rect x='" << fixed(x) << "' y='"
      << fixed(y) << "' width='" << fixed(w) << "' height='" << fixed(height) << "' fill='" << color
      << "' stroke='#fff' stroke-width='0.5'/>";
  if (w > 7.0 * static_cast<double>(label.size())) {
    svg << "<text x='" << fixed(x + 3) << "' y='" << fixed(y + height - 6)
        << "' font-size='10' fill='#fff'>" << escape_html(label) << "</text>";
  }
  svg << "</g>";
}

void row_label(std::ostringstream& svg, double y, const std::string& text) {
  svg << "<text x='4' y='" << fixed(y + kRowHeight - 7) << "' font-size='11'>" << escape_html(text)
      << "</text>";
}

void time_axis(std::ostringstream& svg, const TimeAxis& axis, double y) {
  svg << "<line x1='" << kLabelWidth << "' y1='" << fixed(y) << "' x2='" << kWidth - 10 << "' y2='"
      << fixed(y) << "' stroke='#444'/>";
  for (double t : nice_ticks(0, axis.t1 - axis.t0, 8)) {
    const double x = axis.x(axis.t0 + t);
    svg << "<line x1='" << fixed(x) << "' y1='" << fixed(y) << "' x2='" << fixed(x) << "' y2='"
        << fixed(y + 4) << "' stroke='#444'/><text x='" << fixed(x) << "' y='" << fixed(y + 16)
        << "' text-anchor='middle' font-size='10'>" << tick_text(t) << "</text>";
  }
  svg << "<text x='" << kWidth - 10 << "' y='" << fixed(y + 30)
      << "' text-anchor='end' font-size='11'>microseconds</text>";
}

std::string open_svg(double height, const std::string& title) {
  std::ostringstream svg;
  svg << "<svg xmlns='http://www.w3.org/2000/svg' width='" << kWidth << "' height='"
      << fixed(height) << "' viewBox='0 0 " << kWidth << " " << fixed(height)
      << "' font-family='sans-serif'><text x='4' y='16' font-size='13' font-weight='bold'>"
      << escape_html(title) << "</text>";
  return svg.str();
}

// Depth of a compute span on its row: the step, then forward / backward / ..., then nodes and
// DDP's wait at the end of backward.
int depth_of(const SpanRecord& s) {
  if (s.category == "step") return 0;
  if (s.category == "backward" && s.name != "backward") return 2;
  if (s.category == "ddp") return 2;
  return 1;
}

}  // namespace

std::string phase_color(const std::string& phase) {
  static const std::map<std::string, std::string> colors = {
      {"RS", "#1f77b4"},        {"AG", "#2ca02c"},      {"RD", "#9467bd"},
      {"BCAST", "#8c564b"},     {"REDUCE", "#e377c2"},  {"BARRIER", "#7f7f7f"},
      {"step", "#c7c7c7"},      {"forward", "#ff7f0e"}, {"backward", "#d62728"},
      {"optimizer", "#17becf"}, {"ddp", "#bcbd22"},     {"data", "#aec7e8"}};
  const auto it = colors.find(phase);
  return it == colors.end() ? "#999999" : it->second;
}

std::string ring_timeline_svg(const CollectiveRecord& c) {
  std::set<std::pair<int, int>> lanes;  // (rank, channel)
  for (const StepRecord& s : c.steps) lanes.insert({s.rank, s.channel});
  std::map<std::pair<int, int>, int> row_of;
  for (const auto& lane : lanes) row_of.emplace(lane, static_cast<int>(row_of.size()));
  const double height = kTop + kRowHeight * static_cast<double>(lanes.size()) + 40;
  std::ostringstream svg;
  svg << open_svg(height, core::str(c.op, " seq ", c.seq, ": each step on each rank (",
                                    collectives::bytes_text(c.rank_bytes), " moved per rank)"));
  const TimeAxis axis{c.start_us, c.end_us};
  for (const auto& [lane, row] : row_of) {
    const double y = kTop + kRowHeight * row;
    row_label(svg, y,
              core::str("rank ", lane.first,
                        lanes.size() > static_cast<std::size_t>(c.ranks)
                            ? core::str(" ch ", collectives::lane_label(lane.second))
                            : std::string()));
  }
  for (const StepRecord& s : c.steps) {
    const double y = kTop + kRowHeight * row_of.at({s.rank, s.channel});
    box(svg, axis, s.start_us, s.dur_us, y + 2, kRowHeight - 4, phase_color(s.phase),
        core::str(s.phase, s.step),
        core::str("rank ", s.rank, " ", s.phase, " step ", s.step, ", chunk ", s.chunk, ", peer ",
                  s.peer, ", ", collectives::bytes_text(s.bytes), ", ", fixed(s.dur_us), " us"));
  }
  time_axis(svg, axis, kTop + kRowHeight * static_cast<double>(lanes.size()) + 4);
  svg << "</svg>";
  return svg.str();
}

std::string step_timeline_svg(const std::vector<SpanRecord>& spans,
                              const std::vector<StepRecord>& steps, std::int64_t step) {
  std::map<int, std::pair<double, double>> window;  // rank -> the step span
  for (const SpanRecord& s : spans) {
    if (s.category == "step" && s.index == step)
      window[s.rank] = {s.start_us, s.start_us + s.dur_us};
  }
  if (window.empty()) return "";
  TimeAxis axis{std::numeric_limits<double>::infinity(), -std::numeric_limits<double>::infinity()};
  for (const auto& [rank, w] : window) {
    axis.t0 = std::min(axis.t0, w.first);
    axis.t1 = std::max(axis.t1, w.second);
  }
  const double rank_height = 4 * kRowHeight + 8;  // three compute depths, the collectives
  const double height = kTop + rank_height * static_cast<double>(window.size()) + 40;
  std::ostringstream svg;
  svg << open_svg(height, core::str("training step ", step,
                                    " on every rank: compute above, "
                                    "collective steps below"));
  int r = 0;
  for (const auto& [rank, w] : window) {
    const double y0 = kTop + rank_height * r++;
    row_label(svg, y0, core::str("rank ", rank, " compute"));
    row_label(svg, y0 + 3 * kRowHeight, core::str("rank ", rank, " comm"));
    for (const SpanRecord& s : spans) {
      if (s.rank != rank || s.start_us < axis.t0 || s.start_us > axis.t1) continue;
      if (s.dur_us == 0) {  // a bucket became ready: a tick across the compute rows
        const double x = axis.x(s.start_us);
        svg << "<g><title>" << escape_html(s.name) << "</title><line x1='" << fixed(x) << "' y1='"
            << fixed(y0) << "' x2='" << fixed(x) << "' y2='" << fixed(y0 + 4 * kRowHeight)
            << "' stroke='#000' stroke-dasharray='3,2'/></g>";
        continue;
      }
      const double y = y0 + kRowHeight * depth_of(s);
      box(svg, axis, s.start_us, s.dur_us, y + 1, kRowHeight - 2, phase_color(s.category), s.name,
          core::str(s.name, ": ", fixed(s.dur_us), " us"));
    }
    for (const StepRecord& s : steps) {
      if (s.rank != rank || s.start_us + s.dur_us < axis.t0 || s.start_us > axis.t1) continue;
      const double start = std::max(s.start_us, axis.t0);
      const double end = std::min(s.start_us + s.dur_us, axis.t1);
      box(svg, axis, start, end - start, y0 + 3 * kRowHeight + 1, kRowHeight - 2,
          phase_color(s.phase), core::str(s.phase, s.step),
          core::str(s.op, " seq ", s.seq, " ", s.phase, " step ", s.step, ", ",
                    collectives::bytes_text(s.bytes), ", ", fixed(s.dur_us), " us"));
    }
  }
  time_axis(svg, axis, kTop + rank_height * static_cast<double>(window.size()) + 4);
  svg << "</svg>";
  return svg.str();
}

}  // namespace ringlet::trainer::report
