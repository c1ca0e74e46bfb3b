// StepTrace: opens the rank's tracer on the run directory, counts the traced steps and records
// the autograd nodes of each traced backward.
#include "trainer/step_trace.h"

#include <string>
#include <utility>

#include "core/log.h"

namespace ringlet::trainer {

std::filesystem::path trace_dir(const std::filesystem::path& run_dir) { return run_dir / "trace"; }

StepTrace::StepTrace(collectives::Communicator* comm, int rank,
                     const std::filesystem::path& run_dir, std::int64_t steps) {
  if (comm != nullptr) {
    tracer_ = &comm->tracer();
    const bool from_environment = tracer_->enabled();  // RINGLET_TRACE: the whole run
    if (steps > 0 && !from_environment) {
      tracer_->open(trace_dir(run_dir).string());
      limit_ = steps;
    }
  } else if (steps > 0) {
    own_ = std::make_unique<collectives::Tracer>(trace_dir(run_dir).string(), rank);
    tracer_ = own_.get();
    limit_ = steps;
  }
  if (tracer_ != nullptr && !tracer_->enabled()) tracer_ = nullptr;
  if (tracer_ == nullptr) return;
  collectives::Tracer* tracer = tracer_;
  previous_ =
      tensor::set_backward_observer([tracer](const tensor::Node& node, auto start, auto end) {
        if (!tracer->enabled()) return;
        tracer->record(collectives::TraceSpan{node.name(), "backward", start, end, -1, 0});
      });
  observing_ = true;
}

StepTrace::~StepTrace() {
  try {
    stop();
  } catch (const std::exception& e) {
    core::log(core::LogLevel::error, "the training trace was not written: ", e.what());
  }
}

collectives::Tracer* StepTrace::tracer() const {
  return tracer_ != nullptr && tracer_->enabled() ? tracer_ : nullptr;
}

void StepTrace::end_step() {
  if (tracer_ == nullptr || limit_ == 0 || ++traced_ < limit_) return;
  stop();
}

void StepTrace::stop() {
  if (observing_) {
    tensor::set_backward_observer(std::move(previous_));
    observing_ = false;
  }
  if (tracer_ != nullptr && limit_ > 0) tracer_->close();  // ours to close: trace_steps opened it
  tracer_ = nullptr;
}

}  // namespace ringlet::trainer
