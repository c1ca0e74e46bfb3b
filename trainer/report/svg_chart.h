// Line charts as inline SVG for the run report: a frame, "nice" axis ticks (1, 2, 5 x 10^k),
// one polyline per series (or dots, for sparse series such as per-epoch values) and a legend.
// Everything is text in the page: no script, no font or file from anywhere else.
#pragma once

#include <string>
#include <utility>
#include <vector>

namespace ringlet::trainer::report {

struct ChartSeries {
  std::string name;
  std::string color;                              // any SVG colour: "#1f77b4"
  std::vector<std::pair<double, double>> points;  // (x, y); non-finite y are left out
  bool dots = false;                              // markers at each point as well as the line
};

struct ChartOptions {
  std::string title;
  std::string x_label, y_label;
  int width = 460, height = 260;  // two side by side on the page
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
