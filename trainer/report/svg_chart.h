// Line charts as inline SVG for the run report: a frame, "nice" axis ticks (1, 2, 5 x 10^k),
// one polyline per series and a legend. A sparse series (per-epoch values, or a short run's few
// logged steps) gets a marker at each point, and both axes are padded so that a point never lies
// on the frame: a single point sits in the middle. A chart whose series hold few points says so.
// Everything is text in the page: no script, no font or file from anywhere else.
#pragma once

#include <cstddef>
#include <string>
#include <utility>
#include <vector>

namespace ringlet::trainer::report {

struct ChartSeries {
  std::string name;
  std::string color;                              // any SVG colour: "#1f77b4"
  std::vector<std::pair<double, double>> points;  // (x, y); non-finite y are left out
  bool dots = false;  // markers at each point as well as the line (always for kFewPoints or less)
};

// A series of at most this many points is drawn with a marker at each point.
inline constexpr std::size_t kFewPoints = 12;

struct ChartOptions {
  std::string title;
  std::string x_label, y_label;
  int width = 460, height = 260;  // two side by side on the page
  std::string note;               // a line under the title ("only 2 logged steps: ...")
};

// The chart, or a frame saying "no data" when no series has a point.
std::string line_chart_svg(const ChartOptions& options, const std::vector<ChartSeries>& series);

// Text for HTML and SVG: & < > " ' escaped.
std::string escape_html(const std::string& text);

// Nice tick values covering [low, high]: about `target` of them at 1, 2 or 5 x 10^k.
std::vector<double> nice_ticks(double low, double high, int target = 5);

// A number as a tick label: "0.05", "15000", "2.5e+06".
std::string tick_text(double value);

// A number with `digits` decimals, for SVG coordinates and tables: "12.5", "0.80".
std::string fixed(double value, int digits = 1);

}  // namespace ringlet::trainer::report
