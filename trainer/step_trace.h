// The training trace (`trace_steps: N`): the first N optimizer steps of a command are traced
// into <run dir>/trace/trace.rank<R>.json: every collective step (the communicator's tracer),
// and next to them compute spans on a "compute" row: the step, waiting for data, forward,
// backward with one span per autograd node (ConvolutionBackward, ...), waiting for DDP's
// gradient sync, the optimizer, and an instant as each DDP bucket becomes ready and its
// all-reduce starts. After the N steps the files are written, so a long run's trace can be
// read (`ringlet trace report`, `ringlet report`) while it goes on, and the tracer is closed
// (a later run on the same communicator may open it again). With several ranks,
// RINGLET_TRACE=DIR traces the collectives of the whole run instead, and the compute spans go
// there too; a single rank has no communicator, and only trace_steps traces it.
#pragma once

#include <cstdint>
#include <filesystem>
#include <memory>

#include "collectives/communicator.h"
#include "collectives/trace.h"
#include "tensor/autograd.h"

namespace ringlet::trainer {

// <run dir>/trace
std::filesystem::path trace_dir(const std::filesystem::path& run_dir);

class StepTrace {
 public:
  // comm may be null (one rank): then the trace is this object's own.
  StepTrace(collectives::Communicator* comm, int rank, const std::filesystem::path& run_dir,
            std::int64_t steps);
  ~StepTrace();
  StepTrace(const StepTrace&) = delete;
  StepTrace& operator=(const StepTrace&) = delete;

  // The tracer to record spans on, or null when nothing is being traced.
  collectives::Tracer* tracer() const;
  // After each optimizer step: once N steps are traced, recording stops and the files are
  // written.
  void end_step();

 private:
  void stop();  // the N steps are traced: close the tracer, put the observer back

  std::unique_ptr<collectives::Tracer> own_;  // one rank: no communicator to hold it
  collectives::Tracer* tracer_ = nullptr;
  std::int64_t limit_ = 0;  // 0: no step limit (RINGLET_TRACE, or not tracing)
  std::int64_t traced_ = 0;
  bool observing_ = false;
  tensor::BackwardObserver previous_;  // the observer before this one
};

}  // namespace ringlet::trainer
