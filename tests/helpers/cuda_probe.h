// Whether a CUDA GPU is usable here, asked in a forked child so that the test process itself
// never initializes CUDA (its ranks are forked later, and CUDA does not survive a fork). For
// test cases that run on a GPU and skip visibly without one:
//   TEST_CASE("..." * doctest::skip(!testing::cuda_gpu_present())
//             * doctest::description("needs a CUDA GPU (none here, or built without CUDA)"))
#pragma once

#include <sys/wait.h>
#include <unistd.h>

#include "device/cuda/device_runtime.h"

namespace ringlet::testing {

inline bool cuda_gpu_present() {
  static const bool present = [] {
    if (!device::cuda::built_with_cuda()) return false;
    const pid_t pid = ::fork();
    if (pid < 0) return false;
    if (pid == 0) {
      int count = 0;
      try {
        count = device::cuda::device_count();
      } catch (...) {
        count = 0;
      }
      ::_exit(count > 0 ? 0 : 1);
    }
    int status = 0;
    if (::waitpid(pid, &status, 0) != pid) return false;
    return WIFEXITED(status) && WEXITSTATUS(status) == 0;
  }();
  return present;
}

}  // namespace ringlet::testing
