// trace_section: the timelines and the step table of a traced run.
#include "trainer/report/trace_section.h"

#include <algorithm>
#include <sstream>
#include <vector>

#include "collectives/trace.h"
#include "collectives/trace_analysis.h"
#include "core/error.h"
#include "trainer/report/svg_chart.h"
#include "trainer/report/timeline_svg.h"

namespace ringlet::trainer::report {

namespace fs = std::filesystem;
using collectives::CollectiveRecord;
using collectives::SpanRecord;
using collectives::StepRecord;

namespace {

constexpr std::size_t kTableRows = 64;

bool has_trace_files(const fs::path& dir) {
  std::error_code ec;
  for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
    if (collectives::trace_file_rank(it->path().filename().string()) >= 0) return true;
  }
  return false;
}

// The last training step rank 0 (or the lowest rank) traced whole; -1 when none.
std::int64_t last_traced_step(const std::vector<SpanRecord>& spans) {
  std::int64_t last = -1;
  int rank = -1;
  for (const SpanRecord& s : spans) {
    if (s.category != "step") continue;
    if (rank < 0) rank = s.rank;
    if (s.rank == rank) last = std::max(last, s.index);
  }
  return last;
}

std::string steps_table(const CollectiveRecord& c, const collectives::AlphaBeta& model) {
  std::ostringstream html;
  html << "<table><tr><th>rank</th><th>ch</th><th>step</th><th>phase</th><th>chunk</th>"
          "<th>peer</th><th>bytes</th><th>&micro;s</th><th>GB/s</th><th>model &micro;s</th>"
          "<th>&times; model</th></tr>";
  for (std::size_t i = 0; i < c.steps.size() && i < kTableRows; ++i) {
    const StepRecord& s = c.steps[i];
    const double predicted = model.predict_us(s.bytes);
    html << "<tr><td>" << s.rank << "</td><td>" << collectives::lane_label(s.channel) << "</td><td>"
         << s.step << "</td><td>" << escape_html(s.phase) << "</td><td>" << s.chunk << "</td><td>"
         << s.peer << "</td><td>" << collectives::bytes_text(s.bytes) << "</td><td>"
         << fixed(s.dur_us) << "</td><td>" << fixed(s.gbps(), 2) << "</td><td>" << fixed(predicted)
         << "</td><td>" << (predicted > 0 ? fixed(s.dur_us / predicted, 2) : std::string("-"))
         << "</td></tr>";
  }
  html << "</table>";
  if (c.steps.size() > kTableRows) {
    html << "<p>(the first " << kTableRows << " of " << c.steps.size() << " steps)</p>";
  }
  return html.str();
}

std::string time_split(const CollectiveRecord& c, const collectives::AlphaBeta& model) {
  const collectives::TimeSplit t = collectives::split_time(c, model);
  const double total = std::max(t.measured_us, 1e-9);
  std::ostringstream html;
  html << "<p>Where its time went, summed over every rank's steps (" << fixed(t.measured_us)
       << " &micro;s): alpha " << fixed(t.alpha_us) << " &micro;s ("
       << fixed(100 * t.alpha_us / total) << "%), bytes / beta " << fixed(t.bytes_us)
       << " &micro;s (" << fixed(100 * t.bytes_us / total) << "%), beyond the model (waiting "
       << "on peers, reducing) " << fixed(t.beyond_us) << " &micro;s ("
       << fixed(100 * t.beyond_us / total) << "%).</p>";
  return html.str();
}

std::string ring_html(const std::vector<StepRecord>& steps) {
  const collectives::AlphaBeta model = collectives::fit_alpha_beta(steps);
  const std::vector<CollectiveRecord> all = collectives::group_collectives(steps);
  const CollectiveRecord& c = collectives::pick_collective(all, -1);
  std::ostringstream html;
  html << "<h3>The ring, step by step</h3><p>" << all.size() << " collectives traced; " << c.op
       << " seq " << c.seq << " moved the most bytes per rank. Model of one step: alpha "
       << fixed(model.alpha_us) << " &micro;s + bytes / " << fixed(model.beta_gbps, 2) << " GB/s ("
       << escape_html(model.source) << ").</p>" << ring_timeline_svg(c) << time_split(c, model)
       << steps_table(c, model);
  return html.str();
}

}  // namespace

TraceSection trace_section(const fs::path& dir) {
  TraceSection section;
  if (!has_trace_files(dir)) {
    section.html =
        "<h2>Trace</h2><p>Not traced. Train with <code>--trace_steps N</code> to trace the "
        "first N steps (compute and collective steps on every rank) into the run's "
        "<code>trace/</code> directory.</p>";
    return section;
  }
  const auto traces = collectives::load_traces(dir.string(), "report");
  section.ranks = traces.size();
  const std::vector<SpanRecord> spans = collectives::span_records(traces);
  const std::vector<StepRecord> steps = collectives::step_records(traces);
  std::ostringstream html;
  html << "<h2>Trace</h2><p>" << traces.size() << " rank(s) traced in <code>"
       << escape_html(dir.string()) << "</code>; open the merged file (<code>ringlet trace merge "
       << escape_html(dir.string()) << " -o trace.json</code>) in Perfetto, or see every step "
       << "with <code>ringlet trace report " << escape_html(dir.string()) << "</code>.</p>";
  const std::int64_t step = last_traced_step(spans);
  if (step >= 0) {
    html << "<h3>One training step</h3><p>Dashed lines: a DDP bucket became ready and its "
            "all-reduce started, while backward went on.</p>"
         << step_timeline_svg(spans, steps, step);
  }
  // What fit_alpha_beta needs: a step that moved bytes and took time.
  const bool moved_bytes = std::any_of(
      steps.begin(), steps.end(), [](const StepRecord& s) { return s.bytes > 0 && s.dur_us > 0; });
  if (moved_bytes) html << ring_html(steps);
  section.html = html.str();
  return section;
}

}  // namespace ringlet::trainer::report
