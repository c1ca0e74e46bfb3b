// print_trace_report: three tables (collectives, the steps of one, where its time went) over
// collectives/trace_analysis.h.
#include "trainer/cli/trace_report.h"

#include <algorithm>
#include <cstdio>
#include <map>
#include <set>
#include <vector>

#include "collectives/trace.h"
#include "collectives/trace_analysis.h"
#include "core/error.h"

namespace ringlet::trainer::cli {

using collectives::AlphaBeta;
using collectives::bytes_text;
using collectives::CollectiveRecord;
using collectives::StepRecord;

namespace {

// printf into a std::string, for fixed-width table rows.
template <typename... Args>
std::string row(const char* format, Args... args) {
  char line[256];
  std::snprintf(line, sizeof line, format, args...);
  return line;
}

void print_header(const TraceReportOptions& o, const std::vector<CollectiveRecord>& all,
                  const std::vector<StepRecord>& steps, const AlphaBeta& model, std::ostream& out) {
  std::set<int> ranks;
  for (const StepRecord& s : steps) ranks.insert(s.rank);
  std::map<std::string, int> ops;
  for (const CollectiveRecord& c : all) ++ops[c.op];
  std::string kinds;
  for (const auto& [op, n] : ops) kinds += core::str(kinds.empty() ? "" : ", ", n, " ", op);
  out << "trace " << o.dir << ": " << ranks.size() << " rank(s), " << all.size()
      << " collective(s) (" << kinds << "), " << steps.size() << " steps\n";
  out << row("model: one step of b bytes takes alpha + b / beta, alpha %.1f us, beta %.2f GB/s",
             model.alpha_us, model.beta_gbps)
      << "\n  (" << model.source << ")\n";
}

void print_collectives(const TraceReportOptions& o, const std::vector<CollectiveRecord>& all,
                       const AlphaBeta& model, std::ostream& out) {
  const std::size_t shown = std::min<std::size_t>(all.size(), static_cast<std::size_t>(o.limit));
  out << "\ncollectives";
  if (shown < all.size()) out << " (the first " << shown << " of " << all.size() << "; --limit N)";
  out << ":\n"
      << row("%8s  %-14s %5s %6s %11s %11s %11s %8s\n", "seq", "op", "ranks", "steps", "bytes/rank",
             "wall us", "model us", "x model");
  for (std::size_t i = 0; i < shown; ++i) {
    const CollectiveRecord& c = all[i];
    const double predicted = collectives::model_us(c, model);
    out << row("%8llu  %-14s %5d %6zu %11s %11.1f %11.1f %8.2f\n",
               static_cast<unsigned long long>(c.seq), c.op.c_str(), c.ranks, c.steps.size(),
               bytes_text(c.rank_bytes).c_str(), c.wall_us(), predicted,
               predicted > 0 ? c.wall_us() / predicted : 0.0);
  }
}

void print_steps(const CollectiveRecord& c, const AlphaBeta& model, bool picked,
                 std::ostream& out) {
  out << "\n"
      << c.op << " seq " << c.seq
      << (picked ? " (the most bytes per rank; --seq N shows another)" : "")
      << ", each step on each rank:\n";
  const auto has_phase = [&](const char* phase) {
    return std::any_of(c.steps.begin(), c.steps.end(),
                       [&](const StepRecord& s) { return s.phase == phase; });
  };
  if (c.op == "all_reduce" && c.ranks > 1 && has_phase("RS") && has_phase("AG")) {
    const int n = c.ranks;
    out << "  RS steps reduce a chunk (1/n of the buffer), AG steps pass a reduced chunk on; on n "
           "= "
        << n << " ranks\n  an all-reduce takes n-1 = " << n - 1 << " RS and n-1 = " << n - 1
        << " AG step(s) per channel, 2(n-1) = " << 2 * (n - 1)
        << ",\n  for each piece of the buffer it pipelines\n";
  }
  if (std::any_of(c.steps.begin(), c.steps.end(),
                  [](const StepRecord& s) { return collectives::is_host_ring_lane(s.channel); })) {
    out << "  ch 0h: channel 0's host ring, on a second thread beside the cross-host ring (the "
           "hierarchical\n  all-reduce pipelined in pieces)\n";
  }
  out << row("%6s %4s %5s %-6s %6s %5s %11s %10s %8s %10s %8s\n", "rank", "ch", "step", "phase",
             "chunk", "peer", "bytes", "us", "GB/s", "model us", "x model");
  for (const StepRecord& s : c.steps) {
    const double predicted = model.predict_us(s.bytes);
    out << row("%6d %4s %5d %-6s %6d %5d %11s %10.1f %8.2f %10.1f %8.2f\n", s.rank,
               collectives::lane_label(s.channel).c_str(), s.step, s.phase.c_str(), s.chunk, s.peer,
               bytes_text(s.bytes).c_str(), s.dur_us, s.gbps(), predicted,
               predicted > 0 ? s.dur_us / predicted : 0.0);
  }
}

void print_time_split(const CollectiveRecord& c, const AlphaBeta& model, std::ostream& out) {
  const collectives::TimeSplit t = collectives::split_time(c, model);
  std::uint64_t bytes = 0;
  for (const StepRecord& s : c.steps) bytes += s.bytes;
  const double total = std::max(t.measured_us, 1e-9);
  out << "\nwhere the time went (the sum over every rank's steps, " << row("%.1f us", t.measured_us)
      << "):\n"
      << row("  %-46s %10.1f us %6.1f%%\n",
             row("alpha: %zu steps x %.1f us", c.steps.size(), model.alpha_us).c_str(), t.alpha_us,
             100 * t.alpha_us / total)
      << row("  %-46s %10.1f us %6.1f%%\n",
             row("bytes / beta: %s at %.2f GB/s", bytes_text(bytes).c_str(), model.beta_gbps)
                 .c_str(),
             t.bytes_us, 100 * t.bytes_us / total)
      << row("  %-46s %10.1f us %6.1f%%\n", "beyond the model: waiting on peers, reducing",
             t.beyond_us, 100 * t.beyond_us / total);
}

}  // namespace

void print_trace_report(const TraceReportOptions& o, std::ostream& out) {
  const auto traces = collectives::load_traces(o.dir, "trace report");
  const std::vector<StepRecord> steps = collectives::step_records(traces);
  RINGLET_CHECK(!steps.empty(), Error, "trace report: the traces in '", o.dir,
                "' hold no collective steps");
  const AlphaBeta model = o.p2p_file.empty()
                              ? collectives::fit_alpha_beta(steps)
                              : collectives::alpha_beta_from_p2p(o.p2p_file, o.transport);
  const std::vector<CollectiveRecord> all = collectives::group_collectives(steps);
  const CollectiveRecord& chosen = collectives::pick_collective(all, o.seq);
  print_header(o, all, steps, model, out);
  print_collectives(o, all, model, out);
  print_steps(chosen, model, o.seq < 0, out);
  print_time_split(chosen, model, out);
}

}  // namespace ringlet::trainer::cli
