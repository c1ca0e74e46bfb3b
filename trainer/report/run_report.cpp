// write_run_report: the page's sections in order (summary, curves, ranks, recipe, history,
// trace), each from run_records.h and trace_section.h, in one HTML file with its CSS inline.
#include "trainer/report/run_report.h"

#include <cmath>
#include <iterator>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "core/error.h"
#include "core/file_io.h"
#include "trainer/report/run_records.h"
#include "trainer/report/svg_chart.h"
#include "trainer/report/trace_section.h"
#include "trainer/step_trace.h"

namespace ringlet::trainer::report {

namespace fs = std::filesystem;
using nlohmann::json;

namespace {

constexpr const char* kStyle =
    "body{font-family:sans-serif;margin:24px;color:#222;max-width:1000px}"
    "h1{font-size:22px}h2{font-size:18px;border-bottom:1px solid #ccc;padding-bottom:4px}"
    "h3{font-size:15px}table{border-collapse:collapse;font-size:12px;margin:8px 0}"
    "td,th{border:1px solid #ddd;padding:2px 8px;text-align:right}"
    "th{background:#f3f3f3}td.key{text-align:left}.charts svg{margin:4px}"
    "code{background:#f3f3f3;padding:0 3px}p.note{color:#555;font-size:13px}";

// (x, y) of every record that has both keys as numbers.
std::vector<std::pair<double, double>> points(const std::vector<json>& records, const char* x,
                                              const char* y) {
  std::vector<std::pair<double, double>> out;
  for (const json& r : records) {
    const auto xi = r.find(x), yi = r.find(y);
    if (xi == r.end() || yi == r.end() || !xi->is_number() || !yi->is_number()) continue;
    out.emplace_back(xi->get<double>(), yi->get<double>());
  }
  return out;
}

// Per rank, (step, how long the others waited for it) from the records' "waited_for_ms".
std::vector<ChartSeries> waited_for_series(const std::vector<json>& steps) {
  static const char* const kColors[] = {"#1f77b4", "#ff7f0e", "#2ca02c", "#d62728",
                                        "#9467bd", "#8c564b", "#e377c2", "#7f7f7f"};
  std::vector<ChartSeries> series;
  for (const json& r : steps) {
    const auto w = r.find("waited_for_ms");
    const auto step = r.find("step");
    if (w == r.end() || !w->is_array() || step == r.end() || !step->is_number()) continue;
    for (std::size_t rank = 0; rank < w->size(); ++rank) {
      if (!(*w)[rank].is_number()) continue;
      while (series.size() <= rank) {
        series.push_back(ChartSeries{
            core::str("rank ", series.size()), kColors[series.size() % std::size(kColors)], {}});
      }
      series[rank].points.emplace_back(step->get<double>(), (*w)[rank].get<double>());
    }
  }
  return series;
}

// The ranks the progress lines named as stragglers, and how often.
std::string stragglers_note(const std::vector<json>& steps) {
  std::map<int, int> named;
  for (const json& r : steps) {
    const auto s = r.find("straggler");
    if (s != r.end() && s->is_number_integer()) ++named[s->get<int>()];
  }
  std::string note;
  for (const auto& [rank, windows] : named) {
    note += core::str(note.empty() ? "straggler: " : ", ", "rank ", rank, " in ", windows,
                      " window(s)");
  }
  return note.empty() ? "no straggler (none kept the others waiting over 20% of a step)" : note;
}

// A value as text: strings bare, a command line's array of words joined by spaces.
std::string text_of(const json& value) {
  if (value.is_string()) return value.get<std::string>();
  if (!value.is_array()) return value.dump();
  std::string words;
  for (const json& word : value) words += (words.empty() ? "" : " ") + text_of(word);
  return words;
}

// A record's number, or `fallback` where the key is missing or not a number (null, text).
double number_or(const json& record, const char* key, double fallback) {
  const auto it = record.find(key);
  return it != record.end() && it->is_number() ? it->get<double>() : fallback;
}

// A config or history value as escaped HTML text; `fallback` where the key is missing.
std::string field(const json& record, const char* key, const char* fallback) {
  const auto it = record.find(key);
  return escape_html(it == record.end() ? std::string(fallback) : text_of(*it));
}

std::string summary_html(const RunRecords& run) {
  const json& c = run.config;
  std::ostringstream html;
  html << "<p><b>" << field(c, "model", "?") << "</b> on <b>" << field(c, "dataset", "?")
       << "</b>, " << field(c, "nproc", "1") << " rank(s) on " << field(c, "device", "cpu")
       << ", batch " << field(c, "batch_size", "?") << " per rank, " << field(c, "optimizer", "?")
       << " lr " << field(c, "lr", "?") << ". " << run.epochs.size() << " of "
       << field(c, "epochs", "?") << " epoch(s) done";
  if (!run.epochs.empty()) {
    const json& last = run.epochs.back();
    double best = 0, seconds = 0;
    for (const json& e : run.epochs) {
      best = std::max(best, number_or(e, "accuracy", 0.0));
      seconds += number_or(e, "seconds", 0.0);
    }
    html << ": test accuracy " << fixed(number_or(last, "accuracy", 0.0), 4) << " (best "
         << fixed(best, 4) << "), test loss " << fixed(number_or(last, "test_loss", 0.0), 4) << ", "
         << fixed(number_or(last, "images_per_s", 0.0), 0) << " images/s, " << fixed(seconds, 1)
         << " s of training";
  }
  html << ".</p>";
  return html.str();
}

// "only 2 logged steps" when a run has few records of a kind, else "".
std::string few_points_note(std::size_t n, const char* what) {
  if (n > kFewPoints) return "";
  return core::str("only ", n, " ", what, n == 1 ? "" : "s");
}

std::string charts_html(const RunRecords& run) {
  const ChartSeries step_loss{"loss (logged steps)", "#1f77b4", points(run.steps, "step", "loss")};
  const ChartSeries train_loss{"train loss (epoch)", "#ff7f0e", points(run.epochs, "step", "loss"),
                               true};
  const ChartSeries test_loss{"test loss (epoch)", "#2ca02c",
                              points(run.epochs, "step", "test_loss"), true};
  const ChartSeries accuracy{"test accuracy", "#d62728", points(run.epochs, "epoch", "accuracy"),
                             true};
  ChartSeries lr{"lr (logged steps)", "#9467bd", points(run.steps, "step", "lr")};
  if (lr.points.empty())
    lr = ChartSeries{"lr (epoch)", "#9467bd", points(run.epochs, "step", "lr"), true};
  const ChartSeries step_rate{"images/s (logged steps)", "#8c564b",
                              points(run.steps, "step", "images_per_s")};
  const ChartSeries epoch_rate{"images/s (epoch)", "#e377c2",
                               points(run.epochs, "step", "images_per_s"), true};
  // A short run logs few steps and epochs: each chart says so, and the page says what to change.
  const std::string steps_note = few_points_note(run.steps.size(), "logged step");
  const std::string epochs_note = few_points_note(run.epochs.size(), "epoch");
  std::ostringstream html;
  html << "<h2>Curves</h2>";
  if (!steps_note.empty()) {
    html << "<p class='note'>A short run: " << run.steps.size() << " logged step(s) and "
         << run.epochs.size()
         << " epoch(s), drawn as points; a line between two of them is no curve. "
            "<code>--log_every N</code> logs every N steps (lower it for more points).</p>";
  }
  html << "<div class='charts'>"
       << line_chart_svg({"Loss", "step", "loss", 460, 260, steps_note},
                         {step_loss, train_loss, test_loss})
       << line_chart_svg({"Test accuracy", "epoch", "accuracy", 460, 260, epochs_note}, {accuracy})
       << line_chart_svg({"Learning rate", "step", "lr", 460, 260, steps_note}, {lr})
       << line_chart_svg({"Throughput", "step", "images/s", 460, 260, steps_note},
                         {step_rate, epoch_rate});
  const std::vector<ChartSeries> waited = waited_for_series(run.steps);
  if (!waited.empty()) {
    html << line_chart_svg(
        {"Waiting for each rank (ms per step)", "step", "ms", 460, 260, stragglers_note(run.steps)},
        waited);
  }
  html << "</div>";
  return html.str();
}

std::string recipe_html(const json& config) {
  std::ostringstream html;
  html << "<h2>Recipe</h2><table>";
  for (const auto& [key, value] : config.items()) {
    html << "<tr><td class='key'>" << escape_html(key) << "</td><td class='key'>"
         << escape_html(text_of(value)) << "</td></tr>";
  }
  html << "</table>";
  return html.str();
}

// A number of ms for a table cell: two decimals, or "-" where it is missing or null.
std::string ms_cell(const json& record, const char* key) {
  const auto it = record.find(key);
  return it != record.end() && it->is_number() ? fixed(it->get<double>(), 2) : "-";
}

// Where each rank's step went in the last epoch that says (metrics.jsonl's "ranks").
std::string ranks_html(const std::vector<json>& epochs) {
  const json* ranks = nullptr;
  for (const json& e : epochs) {
    const auto it = e.find("ranks");
    if (it != e.end() && it->is_array() && !it->empty()) ranks = &*it;
  }
  if (ranks == nullptr) return "";
  std::ostringstream html;
  html << "<h2>Ranks</h2><p>Where each rank's training step went in the last epoch (mean per "
          "step, ms). The step is the wall time of the rank's training thread, and it splits "
          "three ways: computing + preempted (ready, waiting for a core) + blocked (asleep: "
          "waiting for the other ranks or for data) = step. A rank that computes faster waits "
          "for the slowest, blocked. Other threads' CPU is not part of that sum: it is the CPU "
          "time the rank's other threads (data loader workers, the communicator's threads, "
          "kernel threads) used during the step, added up over those threads, so with several "
          "running at once on several cores it can exceed the step.</p><table><tr><th>rank</th>"
          "<th>step</th><th>= computing</th><th>+ preempted</th><th>+ blocked</th>"
          "<th>other threads' CPU (not in the sum)</th></tr>";
  for (const json& r : *ranks) {
    if (!r.is_object()) continue;
    html << "<tr><td>" << field(r, "rank", "?") << "</td><td>" << ms_cell(r, "wall_ms")
         << "</td><td>" << ms_cell(r, "computing_ms") << "</td><td>" << ms_cell(r, "preempted_ms")
         << "</td><td>" << ms_cell(r, "blocked_ms") << "</td><td>" << ms_cell(r, "other_threads_ms")
         << "</td></tr>";
  }
  html << "</table>";
  return html.str();
}

std::string history_html(const std::vector<json>& history) {
  if (history.empty()) return "";
  std::ostringstream html;
  html << "<h2>History</h2><table><tr><th>when</th><th>action</th><th>from epoch</th>"
          "<th>command</th></tr>";
  for (const json& h : history) {
    html << "<tr><td class='key'>" << field(h, "time", "") << "</td><td class='key'>"
         << field(h, "action", "") << "</td><td>" << field(h, "from_epoch", "0")
         << "</td><td class='key'><code>" << field(h, "command", "") << "</code></td></tr>";
  }
  html << "</table>";
  return html.str();
}

}  // namespace

ReportSummary write_run_report(const fs::path& run_dir, const fs::path& out) {
  const RunRecords run = read_run_records(run_dir);
  const TraceSection trace = trace_section(trace_dir(run_dir));
  const std::string name = run_dir.filename().empty() ? run_dir.parent_path().filename().string()
                                                      : run_dir.filename().string();
  std::ostringstream html;
  html << "<!DOCTYPE html><html lang='en'><head><meta charset='utf-8'><title>ringlet run "
       << escape_html(name) << "</title><style>" << kStyle
       << "</style></head><body><h1>ringlet run " << escape_html(name) << "</h1>"
       << summary_html(run) << charts_html(run) << ranks_html(run.epochs) << recipe_html(run.config)
       << history_html(run.history) << trace.html << "</body></html>\n";
  core::write_file_atomically(out, html.str());
  return ReportSummary{run.epochs.size(), run.steps.size(), trace.ranks};
}

}  // namespace ringlet::trainer::report
