// line_chart_svg: maps data to a plot area inside fixed margins; both axes span the data padded
// by 5% (a single value gets a band around it, so its point sits in the middle).
#include "trainer/report/svg_chart.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>
#include <sstream>

namespace ringlet::trainer::report {

namespace {

constexpr double kLeft = 62, kRight = 16, kTop = 30, kBottom = 44;

struct Range {
  double low = std::numeric_limits<double>::infinity();
  double high = -std::numeric_limits<double>::infinity();
  bool empty() const { return !(low <= high); }
  void add(double v) {
    low = std::min(low, v);
    high = std::max(high, v);
  }
};

struct Frame {
  ChartOptions o;
  Range x, y;
  double px(double v) const {
    const double span = x.high > x.low ? x.high - x.low : 1.0;
    return kLeft + (v - x.low) / span * (o.width - kLeft - kRight);
  }
  double py(double v) const {
    const double span = y.high > y.low ? y.high - y.low : 1.0;
    return o.height - kBottom - (v - y.low) / span * (o.height - kTop - kBottom);
  }
};

// A single value gets a band around it (10% of its size, or 1 around 0); a range 5% more on
// each side.
void pad(Range& r) {
  if (r.high == r.low) {
    const double band = r.low == 0 ? 1.0 : std::fabs(r.low) * 0.1;
    r.low -= band;
    r.high += band;
  } else {
    const double margin = (r.high - r.low) * 0.05;
    r.low -= margin;
    r.high += margin;
  }
}

void draw_axes(const Frame& f, std::ostringstream& svg) {
  const double bottom = f.o.height - kBottom, right = f.o.width - kRight;
  for (double t : nice_ticks(f.y.low, f.y.high)) {
    const double y = f.py(t);
    svg << "<line x1='" << kLeft << "' y1='" << fixed(y) << "' x2='" << right << "' y2='"
        << fixed(y) << "' stroke='#e5e5e5'/><text x='" << kLeft - 6 << "' y='" << fixed(y + 4)
        << "' text-anchor='end' font-size='11'>" << tick_text(t) << "</text>";
  }
  for (double t : nice_ticks(f.x.low, f.x.high)) {
    const double x = f.px(t);
    svg << "<line x1='" << fixed(x) << "' y1='" << bottom << "' x2='" << fixed(x) << "' y2='"
        << bottom + 4 << "' stroke='#444'/><text x='" << fixed(x) << "' y='" << bottom + 17
        << "' text-anchor='middle' font-size='11'>" << tick_text(t) << "</text>";
  }
  svg << "<rect x='" << kLeft << "' y='" << kTop << "' width='" << right - kLeft << "' height='"
      << bottom - kTop << "' fill='none' stroke='#444'/>";
  svg << "<text x='" << (kLeft + right) / 2 << "' y='" << f.o.height - 8
      << "' text-anchor='middle' font-size='12'>" << escape_html(f.o.x_label) << "</text>";
  svg << "<text transform='translate(14," << (kTop + bottom) / 2
      << ") rotate(-90)' text-anchor='middle' font-size='12'>" << escape_html(f.o.y_label)
      << "</text>";
  svg << "<text x='" << kLeft << "' y='18' font-size='14' font-weight='bold'>"
      << escape_html(f.o.title) << "</text>";
  if (!f.o.note.empty()) {
    svg << "<text class='note' x='" << right << "' y='18' text-anchor='end' font-size='10' "
        << "fill='#777'>" << escape_html(f.o.note) << "</text>";
  }
}

void draw_series(const Frame& f, const ChartSeries& s, std::size_t index, std::ostringstream& svg) {
  std::string points;
  const bool dots = s.dots || s.points.size() <= kFewPoints;
  for (const auto& [x, y] : s.points) {
    if (!std::isfinite(y) || !std::isfinite(x)) continue;
    points += fixed(f.px(x)) + "," + fixed(f.py(y)) + " ";
    if (dots) {
      svg << "<circle cx='" << fixed(f.px(x)) << "' cy='" << fixed(f.py(y)) << "' r='3' fill='"
          << s.color << "'/>";
    }
  }
  if (!points.empty()) {
    svg << "<polyline class='series' fill='none' stroke-width='1.8' stroke='" << s.color
        << "' points='" << points << "'/>";
  }
  const double right = f.o.width - kRight;
  const double y = kTop + 14 + 15 * static_cast<double>(index);
  svg << "<line x1='" << right - 150 << "' y1='" << y - 4 << "' x2='" << right - 132 << "' y2='"
      << y - 4 << "' stroke='" << s.color << "' stroke-width='3'/><text x='" << right - 128
      << "' y='" << y << "' font-size='11'>" << escape_html(s.name) << "</text>";
}

}  // namespace

std::string escape_html(const std::string& text) {
  std::string out;
  for (char c : text) {
    switch (c) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '"': out += "&quot;"; break;
      case '\'': out += "&#39;"; break;
      default: out += c;
    }
  }
  return out;
}

std::vector<double> nice_ticks(double low, double high, int target) {
  if (!(high > low) || !std::isfinite(low) || !std::isfinite(high)) return {low};
  const double raw = (high - low) / std::max(1, target);
  const double power = std::pow(10.0, std::floor(std::log10(raw)));
  double step = power;
  for (double m : {1.0, 2.0, 5.0, 10.0}) {
    step = m * power;
    if (step >= raw) break;
  }
  std::vector<double> ticks;
  for (double t = std::ceil(low / step) * step; t <= high + step * 1e-9; t += step) {
    ticks.push_back(std::fabs(t) < step * 1e-9 ? 0.0 : t);
  }
  return ticks;
}

std::string fixed(double value, int digits) {
  char text[32];
  std::snprintf(text, sizeof text, "%.*f", digits, value);
  return text;
}

std::string tick_text(double value) {
  char text[32];
  const double a = std::fabs(value);
  if (a != 0 && (a >= 1e6 || a < 1e-3)) {
    std::snprintf(text, sizeof text, "%.1e", value);
  } else {
    std::snprintf(text, sizeof text, "%.6g", value);
  }
  return text;
}

std::string line_chart_svg(const ChartOptions& options, const std::vector<ChartSeries>& series) {
  Frame f{options, {}, {}};
  for (const ChartSeries& s : series) {
    for (const auto& [x, y] : s.points) {
      if (!std::isfinite(x) || !std::isfinite(y)) continue;
      f.x.add(x);
      f.y.add(y);
    }
  }
  std::ostringstream svg;
  svg << "<svg xmlns='http://www.w3.org/2000/svg' width='" << options.width << "' height='"
      << options.height << "' viewBox='0 0 " << options.width << " " << options.height
      << "' font-family='sans-serif'>";
  if (f.x.empty()) {
    svg << "<text x='" << kLeft << "' y='18' font-size='14' font-weight='bold'>"
        << escape_html(options.title) << "</text><text x='" << options.width / 2 << "' y='"
        << options.height / 2 << "' text-anchor='middle' fill='#888'>no data</text></svg>";
    return svg.str();
  }
  pad(f.x);
  pad(f.y);
  draw_axes(f, svg);
  for (std::size_t i = 0; i < series.size(); ++i) draw_series(f, series[i], i, svg);
  svg << "</svg>";
  return svg.str();
}

}  // namespace ringlet::trainer::report
