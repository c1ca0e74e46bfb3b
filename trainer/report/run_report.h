// `ringlet report RUN`: one self-contained HTML page about a run directory (run_dir.h): what
// it trained and how far it got, its curves (loss per logged step and per epoch, test
// accuracy, learning rate, images/s) as inline SVG, where each rank's step went in the last
// epoch (computing, preempted, blocked: who waits for whom), its recipe and its history, and,
// when it was traced (trace_steps), one training step's timeline on every rank (compute above
// the collective steps: DDP's overlap), the ring's steps of its largest collective, and those
// steps next to the alpha-beta model. No script, no network: the page opens anywhere.
#pragma once

#include <cstddef>
#include <filesystem>

namespace ringlet::trainer::report {

struct ReportSummary {
  std::size_t epochs = 0;        // metrics.jsonl records
  std::size_t step_records = 0;  // steps.jsonl records
  std::size_t traced_ranks = 0;  // trace files drawn (0: not traced)
};

// Reads run_dir and writes the page to `out` (atomically). Throws core::Error when run_dir is
// not a run directory (no config.json) or one of its files is malformed (naming file and line).
ReportSummary write_run_report(const std::filesystem::path& run_dir,
                               const std::filesystem::path& out);

}  // namespace ringlet::trainer::report
