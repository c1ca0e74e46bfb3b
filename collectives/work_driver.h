// WorkDriver: the communicator's side of a Work (work.h). Its progress threads report each
// channel part done or the op failed, its watchdog fails a device op, and a device op is tied to
// its completion at issue; a program only waits. Not installed (package/public_headers.txt).
#pragma once

#include <exception>
#include <memory>
#include <utility>

#include "collectives/work.h"

namespace ringlet::collectives {

class DeviceCompletion;

struct WorkDriver {
  // Each of the Work's `parts` channel parts reports once; the last one completes it.
  static void part_done(Work& work) { work.part_done(); }
  // Fails it with `error` (rethrown by every wait()), unless it is already done.
  static void fail(Work& work, std::exception_ptr error) { work.fail(std::move(error)); }
  // A device op: done when `completion` is (set once, at issue).
  static void complete_on_device(Work& work, std::shared_ptr<DeviceCompletion> completion) {
    work.complete_on_device(std::move(completion));
  }
  static std::shared_ptr<DeviceCompletion> device_completion(const Work& work) {
    return work.device_completion();
  }
};

}  // namespace ringlet::collectives
